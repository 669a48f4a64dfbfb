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
  if (const char* e = std::getenv("MEMLANE_CPU_KEEP_WEIGHTS"); e && *e == '1') off_ = "MEMLANE_CPU_KEEP_WEIGHTS=1";
  else off_ = file_mapping_problem(plan.blob, plan.blobBytes);  // a plan in memory the caller owns
                                                                // (tests, a copy): DONTNEED would zero it
  for (const TensorInfo& t : plan.tensors)
    if (t.is_weight() && t.data) weights_[t.data].bytes = std::max(weights_[t.data].bytes, t.bytes);
  for (size_t i = 0; i < plan.ops.size(); ++i)
    for (const float* w : weights_read(plan, i)) ++weights_[w].readers;
}

void RepackedWeightRelease::op_built(size_t i, const Kernel* k) {
  const std::vector<const float*> own = k ? k->repacked_weights() : std::vector<const float*>();
  for (const float* w : weights_read(plan_, i)) {
    Weight& s = weights_[w];
    ++s.built;
    s.only_repacked = s.only_repacked && std::find(own.begin(), own.end(), w) != own.end();
    if (s.built != s.readers || !s.only_repacked) continue;
    const uintptr_t page = host_page_bytes(), a = reinterpret_cast<uintptr_t>(w);
    if ((a + s.bytes) / page <= (a + page - 1) / page) continue;  // no whole page of its own
    if (!off_.empty()) {
      ++kept_;
      continue;
    }
    const ReleaseResult r = release_interior_pages(w, s.bytes);
    if (r.released) ++released_, releasedBytes_ += r.bytes;
  }
}

std::string RepackedWeightRelease::note() const {
  if (!released_ && !kept_) return "";  // no weight qualified (no repacking kernel, or small weights)
  if (kept_) return "repacked weights: " + std::to_string(kept_) + " tensors kept (" + off_ + ")";
  return "repacked weights: " + std::to_string(released_) + " tensors, " + std::to_string(releasedBytes_ >> 10) +
         " KiB of plan pages advised DONTNEED";
}

}  // namespace memlane::cpu
