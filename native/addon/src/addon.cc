// Module entry of memlane.node. Classes register themselves (class_registry.h); this file
// only runs them and lists their names in `exports.classes` so tests can check what loaded.
#include <napi.h>

#include "class_registry.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  memlane::addon::ClassRegistry::InitAll(env, exports);
  Napi::Array names = Napi::Array::New(env);
  uint32_t i = 0;
  for (const auto& e : memlane::addon::ClassRegistry::Entries()) names.Set(i++, e.name);
  exports.Set("classes", names);
  return exports;
}

}  // namespace

NODE_API_MODULE(memlane, Init)
