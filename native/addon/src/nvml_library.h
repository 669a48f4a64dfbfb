// NVML opened at run time with dlopen: no build-time dependency on the driver or its
// headers, and a machine without either gets an explanation ("libnvidia-ml.so.1 not found")
// rather than a failed load of the whole addon. The few prototypes and structs used are
// declared here, matching nvml.h (CUDA 11-13 drivers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace memlane::addon {

struct NvmlDeviceInfo {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0;
};

// One process as NVML lists it on one device.
struct NvmlProcess {
  unsigned pid = 0;
  unsigned device = 0;
  std::optional<uint64_t> used_bytes;  // empty: NVML_VALUE_NOT_AVAILABLE
  bool graphics = false;               // listed by the graphics (not compute) query
};

class NvmlLibrary {
 public:
  // The library at `path` (default libnvidia-ml.so.1), opened and initialised once per
  // path for the life of the process (nvmlInit is reference counted and costs ~100 ms;
  // probes are cheap to create). Never null: check available().
  static std::shared_ptr<NvmlLibrary> Open(const std::string& path);

  bool available() const { return available_; }
  const std::string& reason() const { return reason_; }  // why not available
  const std::string& detail() const { return detail_; }  // dlerror / NVML error text
  const std::string& path() const { return path_; }
  std::string driver_version();

  // Each returns false and sets *error on an NVML failure.
  bool Devices(std::vector<NvmlDeviceInfo>* out, std::string* error);
  // Every compute and graphics process on every device.
  bool Processes(std::vector<NvmlProcess>* out, std::string* error);

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

 private:
  explicit NvmlLibrary(std::string path);
  void Load();
  // Calls fn(index, device) for every device, holding mu_. False, with *error set, when NVML
  // is unavailable, a device query fails or fn returns false (having set *error itself).
  bool ForEachDevice(const std::function<bool(unsigned, void*)>& fn, std::string* error);
  bool ListProcesses(void* device, unsigned index, bool graphics, std::vector<NvmlProcess>* out,
                     std::string* error);
  std::string ErrorString(int rc) const;

  struct Api;
  std::string path_;
  void* handle_ = nullptr;
  bool available_ = false;
  std::string reason_, detail_;
  std::unique_ptr<Api> api_;
  std::mutex mu_;  // NVML is thread safe, but our lazily read fields are not
};

}  // namespace memlane::addon
