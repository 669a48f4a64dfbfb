#include "class_registry.h"

#include <algorithm>
#include <cstring>

namespace memlane::addon {

std::vector<ClassRegistry::Entry>& ClassRegistry::Mutable() {
  static std::vector<Entry> entries;
  return entries;
}

void ClassRegistry::Add(const char* name, ClassInit init) { Mutable().push_back({name, init}); }

const std::vector<ClassRegistry::Entry>& ClassRegistry::Entries() { return Mutable(); }

void ClassRegistry::InitAll(Napi::Env env, Napi::Object exports) {
  std::vector<Entry> sorted = Mutable();
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry& a, const Entry& b) { return std::strcmp(a.name, b.name) < 0; });
  for (const Entry& e : sorted) e.init(env, exports);
}

}  // namespace memlane::addon
