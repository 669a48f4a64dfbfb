// Giving back the plan pages of weights that the CPU kernels read only through copies of their
// own: Winograd's U, the channels-in-lanes pointwise panels, the blocked depthwise [tap][16]
// weights are made at prepare, and the originals would otherwise stay resident in the mapping
// (resnet18's peak RSS rose 56 -> 73 MB with them). A weight goes only where every op that
// reads it has a kernel listing it in repacked_weights(); its pages wholly inside the tensor
// are advised DONTNEED (core/host_pages.h), so a later read (another profile's kernel, a
// fallback) just refaults them from the file. Each weight goes as soon as its last reader is
// built, not at the end of prepare, so the originals of all repacked weights are never
// resident at once next to their copies. MEMLANE_CPU_KEEP_WEIGHTS=1 keeps them (A/B aid).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "cpu/kernel.h"
#include "plan/plan.h"

namespace memlane::cpu {

class RepackedWeightRelease {
 public:
  // Counts each weight's readers among plan.ops and checks the mapping once.
  explicit RepackedWeightRelease(const Plan& plan);
  // After ops[i]'s kernel is built (k == nullptr: the op folded into another's epilogue, whose
  // kernel reads its weights).
  void op_built(size_t i, const Kernel* k);
  // Whether plan pages go back at all: the plan is a read-only file mapping and
  // MEMLANE_CPU_KEEP_WEIGHTS=1 is not set (the conv tuner gives back what its timing read on
  // the same terms).
  bool releasing() const { return off_.empty(); }
  // What was given back (or kept, and why), for Backend::notes(); "" where no weight qualified.
  std::string note() const;
  // Bytes of plan pages given back: not resident once inference pages the other weights in
  // (memlane estimate's native load probe, src/estimate/native-load.ts).
  uint64_t released_bytes() const { return releasedBytes_; }

 private:
  struct Weight {
    uint64_t bytes = 0;  // tensors sharing an address: the largest
    int readers = 0, built = 0;
    bool only_repacked = true;
  };
  const Plan& plan_;
  std::string off_;  // why nothing may be released (empty: releasing)
  std::map<const float*, Weight> weights_;
  int released_ = 0, kept_ = 0;  // weights given back; weights that qualified but were kept
  uint64_t releasedBytes_ = 0;
};

}  // namespace memlane::cpu
