// exports.mallocInfo(): glibc malloc's totals over every arena (mallinfo2), in KiB, as the
// Python worker reads them (python/memlane_worker/malloc_stats.py): { freeKiB: fordblks, inUseKiB:
// uordblks + hblkhd }; null off glibc. node-ort's child process adds them to its phase readings
// (src/workers/node-ort-process.mjs): what ORT's load leaves in malloc's free lists is part of
// node-ort's RSS, and how much depends on the process's malloc history (glibc raises its
// mmap threshold to the largest mmapped block freed so far, so a process that freed a large
// buffer before the load keeps the load's temporaries in its heap; docs/memory.md).
#include <napi.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "class_registry.h"

namespace memlane::addon {
namespace {

Napi::Value MallocInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = mallinfo2();
  Napi::Object out = Napi::Object::New(env);
  out.Set("freeKiB", Napi::Number::New(env, double(m.fordblks / 1024)));
  out.Set("inUseKiB", Napi::Number::New(env, double((m.uordblks + m.hblkhd) / 1024)));
  return out;
#else
  return env.Null();  // no mallinfo2 (not glibc, or glibc < 2.33): the figures stay absent
#endif
}

void Init(Napi::Env env, Napi::Object exports) { exports.Set("mallocInfo", Napi::Function::New(env, MallocInfo, "mallocInfo")); }

}  // namespace

MEMLANE_ADDON_CLASS(mallocInfo, Init);

}  // namespace memlane::addon
