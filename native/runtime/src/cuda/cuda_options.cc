#include "cuda_options.h"

#include <cstdlib>

namespace memlane::cuda {
namespace {

Status parse_bool(const std::map<std::string, std::string>& m, const char* key, bool* out,
                  std::string* message, bool* given = nullptr) {
  auto it = m.find(key);
  if (it == m.end()) return Status::kOk;
  const std::string& v = it->second;
  if (v == "true" || v == "1" || v == "on") *out = true;
  else if (v == "false" || v == "0" || v == "off") *out = false;
  else {
    *message = std::string("cuda switch '") + key + "': expected true or false, received '" + v + "'";
    return Status::kInvalidArgument;
  }
  if (given) *given = true;
  return Status::kOk;
}

}  // namespace

Status parse_cuda_options(const std::map<std::string, std::string>& m, CudaOptions* o,
                          std::string* message) {
  *o = CudaOptions{};
  // `variant` (task arg) picks a preset; the individual switches then override it.
  if (auto it = m.find("variant"); it != m.end()) {
    const std::string& v = it->second;
    if (v == "baseline") {
      o->arenaOnce = false; o->pinned = false; o->overlap = false; o->asyncOutputs = false; o->cudaGraph = false;
    } else if (v == "fp16") {
      o->fp16 = true;
    } else if (v == "eager" || v == "no-graph") {
      o->cudaGraph = false;
    } else if (v != "default" && v != "cuda-graph" && v != "all") {
      *message = "cuda switch 'variant': expected 'default', 'baseline', 'eager', 'cuda-graph' or 'fp16', received '" + v + "'";
      return Status::kInvalidArgument;
    }
  }
  if (auto it = m.find("arena"); it != m.end()) {
    if (it->second == "once") o->arenaOnce = true;
    else if (it->second == "per-request") o->arenaOnce = false;
    else {
      *message = "cuda switch 'arena': expected 'once' or 'per-request', received '" + it->second + "'";
      return Status::kInvalidArgument;
    }
  }
  Status s;
  if ((s = parse_bool(m, "pinned", &o->pinned, message)) != Status::kOk) return s;
  if ((s = parse_bool(m, "fp16", &o->fp16, message)) != Status::kOk) return s;
  if ((s = parse_bool(m, "overlap", &o->overlap, message)) != Status::kOk) return s;
  if ((s = parse_bool(m, "asyncOutputs", &o->asyncOutputs, message)) != Status::kOk) return s;
  if ((s = parse_bool(m, "cudaGraph", &o->cudaGraph, message)) != Status::kOk) return s;
  if ((s = parse_bool(m, "lazyLoading", &o->lazyLoading, message, &o->lazyLoadingExplicit)) != Status::kOk)
    return s;
  if ((s = parse_bool(m, "releaseHostWeights", &o->releaseHostWeights, message)) != Status::kOk) return s;
  if (auto it = m.find("contexts"); it != m.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || n < 1 || n > 16) {
      *message = "cuda switch 'contexts': expected an integer 1..16, received '" + it->second + "'";
      return Status::kInvalidArgument;
    }
    o->contexts = static_cast<int>(n);
  }
  // A per-request arena changes the pointers every run: nothing can be captured or
  // double-buffered against it.
  if (!o->arenaOnce) o->cudaGraph = false;
  return Status::kOk;
}

std::string describe(const CudaOptions& o) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  return std::string("arena=") + (o.arenaOnce ? "once" : "per-request") + " pinned=" + b(o.pinned) +
         " fp16=" + b(o.fp16) + " overlap=" + b(o.overlap) + " asyncOutputs=" + b(o.asyncOutputs) +
         " cudaGraph=" + b(o.cudaGraph) + " contexts=" + std::to_string(o.contexts) +
         " lazyLoading=" + b(o.lazyLoading) + " releaseHostWeights=" + b(o.releaseHostWeights);
}

}  // namespace memlane::cuda
