#include "gpu_probe.h"

#include <map>
#include <utility>

#include "class_registry.h"

namespace memlane::addon {

void GpuProbe::Init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = DefineClass(
      env, "GpuProbe",
      {InstanceMethod<&GpuProbe::Status>("status"), InstanceMethod<&GpuProbe::Devices>("devices"),
       InstanceMethod<&GpuProbe::Processes>("processes"),
       InstanceMethod<&GpuProbe::ProcessUsedBytes>("processUsedBytes")});
  exports.Set("GpuProbe", ctor);
}

GpuProbe::GpuProbe(const Napi::CallbackInfo& info) : Napi::ObjectWrap<GpuProbe>(info) {
  std::string library = "libnvidia-ml.so.1";
  if (info.Length() > 0 && !info[0].IsUndefined()) {
    if (!info[0].IsObject())
      throw Napi::TypeError::New(info.Env(), "GpuProbe options: expected an object, received " +
                                                 info[0].ToString().Utf8Value());
    Napi::Object opts = info[0].As<Napi::Object>();
    Napi::Value lib = opts.Get("library");
    if (!lib.IsUndefined()) {
      if (!lib.IsString() || lib.As<Napi::String>().Utf8Value().empty())
        throw Napi::TypeError::New(info.Env(),
                                   "GpuProbe options.library: expected a non-empty string");
      library = lib.As<Napi::String>().Utf8Value();
    }
  }
  nvml_ = NvmlLibrary::Open(library);
}

void GpuProbe::RequireAvailable(Napi::Env env) const {
  if (!nvml_->available()) throw Napi::Error::New(env, "NVML unavailable: " + nvml_->reason());
}

Napi::Value GpuProbe::Status(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object s = Napi::Object::New(env);
  s.Set("available", nvml_->available());
  s.Set("library", nvml_->path());
  if (!nvml_->available()) {
    s.Set("reason", nvml_->reason());
    if (!nvml_->detail().empty()) s.Set("detail", nvml_->detail());
    return s;
  }
  std::string dv = nvml_->driver_version();
  if (!dv.empty()) s.Set("driverVersion", dv);
  std::vector<NvmlDeviceInfo> devs;
  std::string err;
  if (nvml_->Devices(&devs, &err)) {
    s.Set("deviceCount", static_cast<double>(devs.size()));
  } else {
    // Initialised but cannot enumerate (e.g. a driver/library mismatch): unavailable.
    s.Set("available", false);
    s.Set("reason", err);
  }
  return s;
}

Napi::Value GpuProbe::Devices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RequireAvailable(env);
  std::vector<NvmlDeviceInfo> devs;
  std::string err;
  if (!nvml_->Devices(&devs, &err)) throw Napi::Error::New(env, err);
  Napi::Array out = Napi::Array::New(env, devs.size());
  for (size_t i = 0; i < devs.size(); ++i) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("index", devs[i].index);
    d.Set("name", devs[i].name);
    d.Set("uuid", devs[i].uuid);
    // Bytes as doubles: exact below 2^53 (8 PiB).
    d.Set("totalBytes", static_cast<double>(devs[i].total_bytes));
    d.Set("usedBytes", static_cast<double>(devs[i].used_bytes));
    d.Set("freeBytes", static_cast<double>(devs[i].free_bytes));
    out.Set(static_cast<uint32_t>(i), d);
  }
  return out;
}

Napi::Value GpuProbe::Processes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RequireAvailable(env);
  std::vector<NvmlProcess> procs;
  std::string err;
  if (!nvml_->Processes(&procs, &err)) throw Napi::Error::New(env, err);
  Napi::Array out = Napi::Array::New(env, procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    Napi::Object p = Napi::Object::New(env);
    p.Set("pid", procs[i].pid);
    p.Set("device", procs[i].device);
    p.Set("usedBytes", procs[i].used_bytes ? Napi::Value(Napi::Number::New(
                                                 env, static_cast<double>(*procs[i].used_bytes)))
                                           : env.Null());
    p.Set("graphics", procs[i].graphics);
    out.Set(static_cast<uint32_t>(i), p);
  }
  return out;
}

// Per pid, the sum over devices; on one device a process listed by both the compute and
// the graphics query (a "C+G" process) is one context, so the larger entry counts, not both.
Napi::Value GpuProbe::ProcessUsedBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray())
    throw Napi::TypeError::New(env, "processUsedBytes(pids): expected an array of pids");
  RequireAvailable(env);
  Napi::Array pids = info[0].As<Napi::Array>();
  std::vector<NvmlProcess> procs;
  std::string err;
  if (!nvml_->Processes(&procs, &err)) throw Napi::Error::New(env, err);
  // (pid, device) -> bytes (empty optional: listed, amount not available)
  std::map<std::pair<unsigned, unsigned>, std::optional<uint64_t>> per;
  for (const NvmlProcess& p : procs) {
    auto key = std::make_pair(p.pid, p.device);
    auto it = per.find(key);
    if (it == per.end()) {
      per.emplace(key, p.used_bytes);
    } else if (it->second && p.used_bytes && *p.used_bytes > *it->second) {
      it->second = p.used_bytes;
    }
  }
  Napi::Array out = Napi::Array::New(env, pids.Length());
  for (uint32_t i = 0; i < pids.Length(); ++i) {
    Napi::Value v = pids.Get(i);
    if (!v.IsNumber()) throw Napi::TypeError::New(env, "processUsedBytes: pid " +
                                                           std::to_string(i) + " is not a number");
    unsigned pid = v.As<Napi::Number>().Uint32Value();
    bool listed = false, unknown = false;
    uint64_t sum = 0;
    for (const auto& [key, bytes] : per) {
      if (key.first != pid) continue;
      listed = true;
      if (bytes) sum += *bytes; else unknown = true;
    }
    Napi::Object r = Napi::Object::New(env);
    r.Set("pid", pid);
    r.Set("listed", listed);
    r.Set("bytes", listed && !unknown ? Napi::Value(Napi::Number::New(env, static_cast<double>(sum)))
                                      : env.Null());
    out.Set(i, r);
  }
  return out;
}

MEMLANE_ADDON_CLASS(GpuProbe, GpuProbe::Init);

}  // namespace memlane::addon
