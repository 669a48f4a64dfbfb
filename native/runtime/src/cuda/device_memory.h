// GPU memory of this process, for the phase readings (gpuKiB) and memory_stats():
// per-process from NVML when libnvidia-ml is present (dlopen), else the device-wide used
// bytes from cudaMemGetInfo (flagged, since other processes are included).
#pragma once

#include <cstdint>

namespace memlane::cuda {

struct DeviceMemoryReading {
  int64_t usedBytes = -1;   // -1: unknown
  bool perProcess = false;  // true: NVML per-process figure; false: device-wide used
};

DeviceMemoryReading read_device_memory(int device);

}  // namespace memlane::cuda
