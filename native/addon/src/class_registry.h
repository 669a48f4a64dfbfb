// Self-registration of the addon's classes. Each class's .cc ends with
//   MEMLANE_ADDON_CLASS(GpuProbe, GpuProbe::Init);
// and addon.cc calls ClassRegistry::InitAll from the module init, so a new class (e.g.
// SharedMemory in shared_memory.h/.cc) is added without editing addon.cc or CMakeLists.txt
// (which globs *.cc). The addon is one MODULE library, not a static archive, so every
// object file and its registrar is linked in.
#pragma once

#include <napi.h>

#include <vector>

namespace memlane::addon {

// Adds the class's constructor (or functions) to `exports`.
using ClassInit = void (*)(Napi::Env env, Napi::Object exports);

class ClassRegistry {
 public:
  struct Entry {
    const char* name;
    ClassInit init;
  };
  static void Add(const char* name, ClassInit init);
  // Calls every registered init, in name order (static init order across files is not
  // defined; sorting keeps exports deterministic).
  static void InitAll(Napi::Env env, Napi::Object exports);
  static const std::vector<Entry>& Entries();

 private:
  static std::vector<Entry>& Mutable();  // function-local static: no init-order fiasco
};

struct ClassRegistrar {
  ClassRegistrar(const char* name, ClassInit init) { ClassRegistry::Add(name, init); }
};

}  // namespace memlane::addon

#define MEMLANE_ADDON_CLASS(Name, InitFn) \
  static ::memlane::addon::ClassRegistrar memlane_addon_registrar_##Name(#Name, InitFn)
