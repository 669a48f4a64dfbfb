#include "device_memory.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <mutex>
#include <vector>

namespace memlane::cuda {
namespace {

struct ProcInfo {  // nvmlProcessInfo_t (v2/v3 layout)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
using ProcFn = int (*)(void*, unsigned*, ProcInfo*);
struct Nvml {
  bool ok = false;
  int (*handle_by_index)(unsigned, void**) = nullptr;
  ProcFn procs = nullptr;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    n.handle_by_index = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    n.procs = reinterpret_cast<ProcFn>(dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"));
    if (!n.procs) n.procs = reinterpret_cast<ProcFn>(dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2"));
    n.ok = init && n.handle_by_index && n.procs && init() == 0;
  });
  return n;
}

}  // namespace

DeviceMemoryReading read_device_memory(int device) {
  DeviceMemoryReading r;
  const Nvml& n = nvml();
  if (n.ok) {
    // NVML orders devices by PCI bus id; CUDA by speed unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
    // With one GPU (the common case) both agree; otherwise this is approximate.
    void* dev = nullptr;
    if (n.handle_by_index(static_cast<unsigned>(device), &dev) == 0) {
      std::vector<ProcInfo> buf(64);
      unsigned count = static_cast<unsigned>(buf.size());
      if (n.procs(dev, &count, buf.data()) == 0) {
        const unsigned self = static_cast<unsigned>(getpid());
        for (unsigned i = 0; i < count && i < buf.size(); ++i) {
          if (buf[i].pid == self && buf[i].usedGpuMemory != ~0ULL) {
            r.usedBytes = static_cast<int64_t>(buf[i].usedGpuMemory);
            r.perProcess = true;
            return r;
          }
        }
      }
    }
  }
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    r.usedBytes = static_cast<int64_t>(total_b - free_b);
  return r;
}

}  // namespace memlane::cuda
