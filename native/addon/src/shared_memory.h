// SharedMemory: a named POSIX shared-memory segment (shm_open + ftruncate + mmap) seen from
// JavaScript as an external ArrayBuffer, so tensors cross processes on one host without
// passing through a socket (docs/protocol.md: TensorRef.shm). src/transport/shm.ts wraps it.
//   new SharedMemory(name, {create: true, size, populate?})  new segment (O_EXCL, mode
//                                                       0600); populate pre-faults it
//   new SharedMemory(name, {readOnly?: boolean})        existing segment, its whole size;
//                                                       readOnly maps copy-on-write: a
//                                                       write stays private, never a crash
//   .name, .size, .readOnly
//   .buffer    the mapping as an ArrayBuffer (same object on every read until close())
//   .close()   drops this object's reference; the mapping is unmapped by the ArrayBuffer's
//              finalizer once no JavaScript view of it remains (never under a live view)
//   .close({unmap: true})  detaches the ArrayBuffer (every view becomes zero-length) and
//              unmaps now: for a producer that is done with the segment
//   SharedMemory.unlink(name) -> true if removed, false if it did not exist
// Names are plain segment names without the leading "/" (as they appear in /dev/shm).
// Failures throw an Error whose `code` is "SHM_UNAVAILABLE" and whose `errno`/`syscall`
// name what the kernel refused.
#pragma once

#include <napi.h>

#include <cstddef>
#include <memory>
#include <string>

namespace memlane::addon {

// The mmap'd range, shared by the object and the ArrayBuffer's finalizer: whichever comes
// first (close({unmap: true}) or garbage collection) unmaps it, once.
struct Mapping {
  void* data = nullptr;
  size_t length = 0;
  void Unmap();
};

class SharedMemory : public Napi::ObjectWrap<SharedMemory> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  explicit SharedMemory(const Napi::CallbackInfo& info);

 private:
  static Napi::Value Unlink(const Napi::CallbackInfo& info);
  Napi::Value Name(const Napi::CallbackInfo& info);
  Napi::Value Size(const Napi::CallbackInfo& info);
  Napi::Value ReadOnly(const Napi::CallbackInfo& info);
  Napi::Value Buffer(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  std::string name_;
  size_t size_ = 0;
  bool read_only_ = false;
  // Strong until close(): the ArrayBuffer owns the mapping (its finalizer unmaps).
  Napi::Reference<Napi::ArrayBuffer> buffer_;
  std::shared_ptr<Mapping> mapping_;
};

}  // namespace memlane::addon
