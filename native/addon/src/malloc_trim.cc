// exports.mallocTrim(): gives the pages of glibc malloc's free chunks back to the kernel
// (malloc_trim(0) walks every free chunk, not only the heap's top) and says whether any went.
// The orchestrator calls it after a full V8 collection before node-ort's phases
// (src/workers/collect-garbage.ts): the ArrayBuffers memlane's own work freed (an ONNX file
// decoded for an estimate or a compile) sit in malloc's heap between live blocks, where no
// free() returns them, and node-ort's figures are this process's.
#include <napi.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "class_registry.h"

namespace memlane::addon {
namespace {

Napi::Value MallocTrim(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
  return Napi::Boolean::New(info.Env(), false);  // no glibc malloc: nothing this call can return
#endif
}

void Init(Napi::Env env, Napi::Object exports) { exports.Set("mallocTrim", Napi::Function::New(env, MallocTrim, "mallocTrim")); }

}  // namespace

MEMLANE_ADDON_CLASS(mallocTrim, Init);

}  // namespace memlane::addon
