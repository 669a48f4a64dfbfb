#include "cpu/weight_release.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/host_pages.h"

namespace memlane::cpu {
namespace {

// The float weights ops[i] reads, each once.
std::vector<const float*> weights_read(const Plan& plan, size_t i) {
  std::vector<const float*> w;
  for (int32_t id : plan.ops[i].inputs) {
    if (id == kAbsentInput) continue;
    const TensorInfo& t = plan.tensors[size_t(id)];
    if (t.is_weight() && t.data && std::find(w.begin(), w.end(), t.data) == w.end()) w.push_back(t.data);
  }
  return w;
}

}  // namespace

RepackedWeightRelease::RepackedWeightRelease(const Plan& plan) : plan_(plan) {
  if (const char* e = std::getenv("MEMLANE_CPU_KEEP_WEIGHTS"); e && *e == '1') {
    off_ = "MEMLANE_CPU_KEEP_WEIGHTS=1";
    return;
  }
  // A plan parsed from memory the caller owns (tests, a copy): dropping pages would zero it.
  off_ = file_mapping_problem(plan.blob, plan.blobBytes);
  if (!off_.empty()) return;
  for (const TensorInfo& t : plan.tensors)
    if (t.is_weight() && t.data) weights_[t.data].bytes = std::max(weights_[t.data].bytes, t.bytes);
  for (size_t i = 0; i < plan.ops.size(); ++i)
    for (const float* w : weights_read(plan, i)) ++weights_[w].readers;
}

void RepackedWeightRelease::op_built(size_t i, const Kernel* k) {
  if (!off_.empty()) return;
  const std::vector<const float*> own = k ? k->repacked_weights() : std::vector<const float*>();
  for (const float* w : weights_read(plan_, i)) {
    Weight& s = weights_[w];
    ++s.built;
    s.only_repacked = s.only_repacked && std::find(own.begin(), own.end(), w) != own.end();
    if (s.built != s.readers || !s.only_repacked) continue;
    const ReleaseResult r = release_interior_pages(w, s.bytes);
    if (r.released) ++released_, releasedBytes_ += r.bytes;
  }
}

std::string RepackedWeightRelease::note() const {
  if (!off_.empty()) return "repacked weights: none released (" + off_ + ")";
  return "repacked weights: " + std::to_string(released_) + " tensors, " + std::to_string(releasedBytes_ >> 10) +
         " KiB of plan pages advised DONTNEED";
}

}  // namespace memlane::cpu
