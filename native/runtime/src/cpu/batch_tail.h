// The batch tail: a plan's last, weight-heavy ops run once over the whole batch while the
// ops before them run in chunks of samples (cpu_backend.cc).
//
// Chunks keep a large batch's activations in L2 and its arena small, but each chunk reads
// every layer's weights again: a classifier at batch 8 is eight GEMVs that stream its weights
// from memory eight times (alexnet's 230 MB of Gemm weights: 83 ms against ORT's one GEMM
// at 14 ms), and a layer whose weights fit in L2 finds them evicted by the other layers at
// every sample. Past the last op whose activations outweigh its weights, the activations are
// small: those ops get an arena of their own, planned here for one sample and scaled by the
// batch like the plan's, and run at the whole batch with the pool's threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace memlane::cpu {

struct BatchTail {
  size_t start = 0;  // first tail op; == ops.size(): no tail
  // ops [0, start), every tensor the tail reads from them as a graph output, so that no load-
  // time fusion of the prefix folds one away.
  Plan prefix;
  // ops [start, n), the tail's activations at offsets of its own arena (per sample, batch-
  // scaled); tensors of the prefix keep the plan's offsets and are never read through it.
  Plan tail;
  // Written by the prefix, read by the tail: copied from each chunk's arena into the tail's.
  std::vector<int32_t> carried;
  // Graph inputs the tail reads: copied from the caller's batch into the tail's arena.
  std::vector<int32_t> inputs;
  // Per graph output (plan.outputs order): written by a tail op (else the prefix's arena has it).
  std::vector<bool> outputFromTail;
  bool empty() const { return tail.ops.empty(); }
};

// The largest tail worth running at the whole batch: the suffix of ops each of which has no
// weights or weights at least its per-sample activation bytes that the whole batch will reuse
// (a Gemm or MatMul reads B once for all rows; a conv's weights are found again in cache by
// the next sample, instead of after every other layer's: any size, since resnet18's layer4
// 3x3 convs, 2.4 MiB each, measured 0.92x at batch 8, 1 thread, in the tail), its own arena
// at most kMaxBytesPerSample a sample, starting at a weighted op, holding at least
// kMinWeightBytes of weights. Empty where none qualifies.
// MEMLANE_BATCH_TAIL=0: none; MEMLANE_BATCH_TAIL_START=i: from op i (tuning aids).
BatchTail plan_batch_tail(const Plan& plan);

// The tail's ops [start, n) with their activations placed in an arena of their own: first
// fit by lifetime over one sample (64-byte aligned), the plan's rule (docs/plan-format.md).
// Exposed for the tests; plan_batch_tail calls it.
Plan tail_plan(const Plan& plan, size_t start);

inline constexpr uint64_t kBatchTailMaxBytesPerSample = uint64_t(512) << 10;
inline constexpr uint64_t kBatchTailMinWeightBytes = uint64_t(256) << 10;

}  // namespace memlane::cpu
