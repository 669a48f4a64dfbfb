// exports.v8LowMemory(): V8's low-memory notification for this thread's isolate: every
// collectable object collected and, unlike a `gc()` from JavaScript, the heap shrunk: the
// young generation's semi-spaces (grown to 16 MiB each under allocation pressure, and kept
// resident once grown) go back to their initial size, and pooled pages are released. The
// orchestrator calls it before node-ort's phases (src/workers/collect-garbage.ts): node-ort's
// figures are this process's, and how far memlane's own work (a compile, an estimate, a train
// stage's transfers) grew the young generation is not onnxruntime-node's memory. In a bare node
// process that allocated and dropped 2 M small objects, two full collections left new space at
// 32.0 MiB resident (RSS 86 MiB); this left it under 1 MiB (RSS 54.5).
//
// The one function of the addon that uses V8's C++ API rather than Node-API: V8 has no
// Node-API equivalent. It builds against the running node's own headers (/usr/include/node);
// where they lack v8.h it does nothing and says so (false).
#include <napi.h>
// V8's headers from Node 23 on need C++20, and the addon builds as C++17: there, and where the
// headers lack v8.h, the function is built without V8 and does nothing (false), so one file
// never stops the rest of the addon from building.
#if __has_include(<v8.h>) && __has_include(<node_version.h>)
#include <node_version.h>
#if NODE_MAJOR_VERSION < 23 || __cplusplus >= 202002L
#include <v8.h>
#define MEMLANE_HAVE_V8_H 1
#endif
#endif

#include "class_registry.h"

namespace memlane::addon {
namespace {

Napi::Value V8LowMemory(const Napi::CallbackInfo& info) {
#if defined(MEMLANE_HAVE_V8_H)
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) isolate->LowMemoryNotification();
  return Napi::Boolean::New(info.Env(), isolate != nullptr);
#else
  return Napi::Boolean::New(info.Env(), false);  // Node-API headers without V8's: nothing done
#endif
}

void Init(Napi::Env env, Napi::Object exports) { exports.Set("v8LowMemory", Napi::Function::New(env, V8LowMemory, "v8LowMemory")); }

}  // namespace

MEMLANE_ADDON_CLASS(v8LowMemory, Init);

}  // namespace memlane::addon
