// Per-shape choice of a conv's kernel by timing, at prepare. make_conv's rules (conv.cc) were
// measured on one machine; another CPU moves the break-even points between its paths (on an
// AMD EPYC with AVX-512, squeezenet1_1's 13x13 Winograd convs ran at 1.25-1.3x the pixel-rows
// path's time, where the rule had measured Winograd at 0.6x the direct kernel's). The tuner
// builds the kernels a conv could take (make_conv with the rule's path avoided, then the next
// one's: BuildCtx::conv_avoid), times each on zeroed scratch memory with the backend's pool,
// batch 1, its weights flushed from the caches, and keeps the fastest where it beats the
// rule's by a margin; the others are freed before the next conv is built (their repacked
// weights too). Shapes seen before take the same choice without timing.
// Opt-in (MEMLANE_CONV_TUNE=1 or BackendOptions::tuneConvs): processes that break a near
// tie differently compute outputs that differ by the paths' rounding.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cpu/kernel.h"

namespace memlane::cpu {

// Which candidate to keep: the fastest, unless the rule's (index 0) is within `margin` of it
// (a near tie keeps the rule: the same choice in every process of a noisy machine). Times of
// candidates not measured are negative.
size_t pick_conv_candidate(const std::vector<double>& seconds, double margin);

class ConvTuner {
 public:
  // givePagesBack: the plan's pages of W that the timed runs read go back to the file after
  // each conv (the backend gives back plan pages at all: RepackedWeightRelease::releasing).
  ConvTuner(ThreadPool* pool, bool givePagesBack) : pool_(pool), givePagesBack_(givePagesBack) {}
  ~ConvTuner();
  ConvTuner(const ConvTuner&) = delete;
  ConvTuner& operator=(const ConvTuner&) = delete;

  // The kernel for `op` (a Conv) given make_conv's own choice `rule`, built with `bc` (its
  // epilogue, if any, as make_conv saw it): `rule` itself, or an alternative that ran faster.
  std::unique_ptr<Kernel> choose(const BuildCtx& bc, const Op& op, std::unique_ptr<Kernel> rule);
  // For Backend::notes(): how many convs were timed, in how long, and which left the rule's path.
  std::string note() const;

 private:
  struct Candidate {
    std::unique_ptr<Kernel> kernel;
    uint32_t avoid = 0;  // the ConvAvoid bits make_conv was built with
  };
  double time_once(const Kernel& k, uint64_t wsFloats, uint64_t arenaBytes, uint64_t zeroOffset, uint64_t zeroBytes);
  bool scratch(uint64_t arenaBytes, uint64_t wsFloats);
  void release_scratch();
  void untouch_plan_weights(const float* w, uint64_t bytes) const;

  ThreadPool* pool_;
  bool givePagesBack_;
  std::map<std::vector<int64_t>, uint32_t> decided_;  // shape key -> ConvAvoid bits of the kept kernel
  std::map<std::string, int> moves_;                  // "winograd -> pixel_rows" -> convs
  int timed_ = 0, reused_ = 0, candidates_ = 0;
  double seconds_ = 0;
  // Scratch arena (batch 1 of the plan being built: only the timed conv's tensors are touched)
  // and workspace, mmap'd: zero pages, their touched pages given back after each conv
  // (release_scratch) and the mappings at the end of prepare (not kept by malloc for later
  // allocations).
  void* arena_ = nullptr;
  uint64_t arenaBytes_ = 0;
  void* ws_ = nullptr;
  uint64_t wsBytes_ = 0;
};

}  // namespace memlane::cpu
