// GpuProbe: the JavaScript view of NVML (src/memory/gpu.ts wraps it).
//   new GpuProbe({library?: string})      library defaults to "libnvidia-ml.so.1"
//   status()   -> {available, reason?, detail?, library, driverVersion?, deviceCount?}
//   devices()  -> [{index, name, uuid, totalBytes, usedBytes, freeBytes}]
//   processes() -> [{pid, device, usedBytes: number|null, graphics}]
//   processUsedBytes(pids) -> [{pid, bytes: number|null, listed}]
// devices/processes/processUsedBytes throw when NVML is unavailable (the caller asks
// status() first): an unavailable GPU reads as unavailable, never as zero bytes.
#pragma once

#include <napi.h>

#include <memory>

#include "nvml_library.h"

namespace memlane::addon {

class GpuProbe : public Napi::ObjectWrap<GpuProbe> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  explicit GpuProbe(const Napi::CallbackInfo& info);

 private:
  Napi::Value Status(const Napi::CallbackInfo& info);
  Napi::Value Devices(const Napi::CallbackInfo& info);
  Napi::Value Processes(const Napi::CallbackInfo& info);
  Napi::Value ProcessUsedBytes(const Napi::CallbackInfo& info);
  void RequireAvailable(Napi::Env env) const;

  std::shared_ptr<NvmlLibrary> nvml_;
};

}  // namespace memlane::addon
