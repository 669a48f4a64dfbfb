#include "nvml_library.h"

#include <dlfcn.h>

#include <map>

namespace memlane::addon {
namespace {

// From nvml.h. nvmlReturn_t is an int enum; a device is an opaque pointer.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
// nvmlProcessInfo_v1_t (used by the unversioned query, drivers < 450).
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
// nvmlProcessInfo_v2_t; nvmlProcessInfo_t for the _v3 query has the same layout.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "NVML process info layout");

using ProcFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, void*);

}  // namespace

struct NvmlLibrary::Api {
  nvmlReturn_t (*init)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  // [0] compute, [1] graphics; each v3, v2, v1 (any may be missing).
  ProcFn procs[2][3] = {{nullptr, nullptr, nullptr}, {nullptr, nullptr, nullptr}};
};

std::shared_ptr<NvmlLibrary> NvmlLibrary::Open(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<NvmlLibrary>> libs;
  std::lock_guard<std::mutex> lock(mu);
  auto it = libs.find(path);
  if (it != libs.end()) return it->second;
  std::shared_ptr<NvmlLibrary> lib(new NvmlLibrary(path));
  lib->Load();
  libs[path] = lib;
  return lib;
}

NvmlLibrary::NvmlLibrary(std::string path) : path_(std::move(path)), api_(new Api) {}

// Never dlclose'd nor nvmlShutdown'd: the instance lives until exit (see Open).
NvmlLibrary::~NvmlLibrary() = default;

void NvmlLibrary::Load() {
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    reason_ = path_ + " not found";
    const char* e = dlerror();
    detail_ = e ? e : "";
    return;
  }
  auto sym = [&](const char* name) { return dlsym(handle_, name); };
  auto need = [&](const char* name, void* p) {
    if (!p && reason_.empty()) reason_ = path_ + " lacks " + name;
    return p;
  };
  Api& a = *api_;
  a.init = reinterpret_cast<decltype(a.init)>(need("nvmlInit_v2", sym("nvmlInit_v2")));
  a.error_string = reinterpret_cast<decltype(a.error_string)>(sym("nvmlErrorString"));
  a.device_count = reinterpret_cast<decltype(a.device_count)>(
      need("nvmlDeviceGetCount_v2", sym("nvmlDeviceGetCount_v2")));
  a.handle_by_index = reinterpret_cast<decltype(a.handle_by_index)>(
      need("nvmlDeviceGetHandleByIndex_v2", sym("nvmlDeviceGetHandleByIndex_v2")));
  a.name = reinterpret_cast<decltype(a.name)>(need("nvmlDeviceGetName", sym("nvmlDeviceGetName")));
  a.uuid = reinterpret_cast<decltype(a.uuid)>(sym("nvmlDeviceGetUUID"));
  a.memory = reinterpret_cast<decltype(a.memory)>(
      need("nvmlDeviceGetMemoryInfo", sym("nvmlDeviceGetMemoryInfo")));
  a.driver_version = reinterpret_cast<decltype(a.driver_version)>(sym("nvmlSystemGetDriverVersion"));
  const char* names[2][3] = {
      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
       "nvmlDeviceGetComputeRunningProcesses"},
      {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
       "nvmlDeviceGetGraphicsRunningProcesses"}};
  for (int k = 0; k < 2; ++k)
    for (int v = 0; v < 3; ++v) a.procs[k][v] = reinterpret_cast<ProcFn>(sym(names[k][v]));
  if (!reason_.empty()) return;
  nvmlReturn_t rc = a.init();
  if (rc != NVML_SUCCESS) {
    reason_ = "nvmlInit failed: " + ErrorString(rc);
    detail_ = "NVML error " + std::to_string(rc);
    return;
  }
  available_ = true;
}

std::string NvmlLibrary::ErrorString(int rc) const {
  if (api_->error_string) {
    const char* s = api_->error_string(rc);
    if (s) return s;
  }
  return "NVML error " + std::to_string(rc);
}

std::string NvmlLibrary::driver_version() {
  if (!available_ || !api_->driver_version) return "";
  char buf[96] = {0};
  return api_->driver_version(buf, sizeof buf) == NVML_SUCCESS ? std::string(buf) : "";
}

bool NvmlLibrary::ForEachDevice(const std::function<bool(unsigned, void*)>& fn,
                                std::string* error) {
  if (!available_) return *error = reason_, false;
  std::lock_guard<std::mutex> lock(mu_);
  unsigned count = 0;
  nvmlReturn_t rc = api_->device_count(&count);
  if (rc != NVML_SUCCESS) return *error = "nvmlDeviceGetCount: " + ErrorString(rc), false;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if ((rc = api_->handle_by_index(i, &dev)) != NVML_SUCCESS)
      return *error = "nvmlDeviceGetHandleByIndex(" + std::to_string(i) + "): " + ErrorString(rc),
             false;
    if (!fn(i, dev)) return false;
  }
  return true;
}

bool NvmlLibrary::Devices(std::vector<NvmlDeviceInfo>* out, std::string* error) {
  out->clear();
  return ForEachDevice(
      [&](unsigned i, nvmlDevice_t dev) {
        NvmlDeviceInfo d;
        d.index = i;
        char buf[256] = {0};
        if (api_->name(dev, buf, sizeof buf) == NVML_SUCCESS) d.name = buf;
        char ubuf[96] = {0};
        if (api_->uuid && api_->uuid(dev, ubuf, sizeof ubuf) == NVML_SUCCESS) d.uuid = ubuf;
        nvmlMemory_t mem{};
        nvmlReturn_t rc = api_->memory(dev, &mem);
        if (rc != NVML_SUCCESS)
          return *error = "nvmlDeviceGetMemoryInfo(" + std::to_string(i) + "): " + ErrorString(rc),
                 false;
        d.total_bytes = mem.total;
        d.used_bytes = mem.used;
        d.free_bytes = mem.free;
        out->push_back(std::move(d));
        return true;
      },
      error);
}

bool NvmlLibrary::Processes(std::vector<NvmlProcess>* out, std::string* error) {
  out->clear();
  return ForEachDevice(
      [&](unsigned i, nvmlDevice_t dev) {
        return ListProcesses(dev, i, false, out, error) && ListProcesses(dev, i, true, out, error);
      },
      error);
}

// Tries the newest query first; a missing symbol or FUNCTION_NOT_FOUND falls back to the
// next. The list can grow between the size query and the read: retry a few times.
bool NvmlLibrary::ListProcesses(void* device, unsigned index, bool graphics,
                                std::vector<NvmlProcess>* out, std::string* error) {
  for (int v = 0; v < 3; ++v) {
    ProcFn fn = api_->procs[graphics ? 1 : 0][v];
    if (!fn) continue;
    const bool v1 = (v == 2);
    unsigned n = 16;
    nvmlReturn_t rc = NVML_SUCCESS;
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::vector<nvmlProcessInfo_v2_t> buf2(v1 ? 0 : n);
      std::vector<nvmlProcessInfo_v1_t> buf1(v1 ? n : 0);
      unsigned got = n;
      rc = fn(device, &got, v1 ? static_cast<void*>(buf1.data()) : static_cast<void*>(buf2.data()));
      if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        n = got + 8;
        continue;
      }
      if (rc != NVML_SUCCESS) break;
      for (unsigned j = 0; j < got && j < n; ++j) {
        NvmlProcess p;
        p.device = index;
        p.graphics = graphics;
        p.pid = v1 ? buf1[j].pid : buf2[j].pid;
        unsigned long long used = v1 ? buf1[j].usedGpuMemory : buf2[j].usedGpuMemory;
        if (used != NVML_VALUE_NOT_AVAILABLE) p.used_bytes = used;
        out->push_back(p);
      }
      return true;
    }
    if (rc == NVML_ERROR_FUNCTION_NOT_FOUND) continue;
    // Graphics queries are unsupported on many compute-only boards: not an error.
    if (rc == NVML_ERROR_NOT_SUPPORTED) return true;
    *error = std::string("nvmlDeviceGet") + (graphics ? "Graphics" : "Compute") +
             "RunningProcesses(" + std::to_string(index) + "): " + ErrorString(rc);
    return false;
  }
  return true;  // no query available at all: nothing to list
}

}  // namespace memlane::addon
