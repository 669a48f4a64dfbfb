// Per-op wall time of the CPU backend (docs/profiling.md). Off by default: the backend's run
// loop checks on() once per pass and runs its kernels untimed, so the normal path pays one
// branch. On (Backend::set_profiling, or MEMLANE_PROFILE=1 for the whole process), each kernel
// call is timed with steady_clock and summed per op; the serial path is taken (no batch lanes),
// so an op's time is its own and not a mix of threads. Kernel slots are plan-op indices; a null
// slot is an op folded into the kernel before it (a Conv's Add/Relu epilogue).
//
// Not synchronised, on purpose: time() is only called from the serial path (profiling never
// takes the batch lanes, so one thread times every kernel), and start/stop/result are only
// called between runs, from the thread that calls run() (Runtime::set_profiling is not to be
// called while a run is in flight). A caller that breaks either rule races on these counters.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "memlane/runtime.h"
#include "plan/plan.h"

namespace memlane::cpu {

class OpProfiler {
 public:
  // Starts a fresh profile of `ops` plan ops; the counts so far are kept for print().
  void start(size_t ops);
  void stop() { on_ = false; }
  bool on() const { return on_; }

  template <class F>
  void time(size_t op, F&& run) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    totalUs_[op] += us;
    minUs_[op] = calls_[op] ? (us < minUs_[op] ? us : minUs_[op]) : us;
    ++calls_[op];
  }
  void end_run() { ++runs_; }

  // Ops with a kernel (kernel_paths[i] not null: the kernel's path(), "" where it has one), in
  // plan order, with the ops folded into each.
  OpProfile result(const Plan& plan, const std::vector<const char*>& kernel_paths) const;
  // MEMLANE_PROFILE=1's stderr dump: the mean per run of every op over every profiled run
  // since the first start(), so a task's own profile (which restarts the counters) does not
  // take the earlier runs out of the whole-process dump.
  void print(const Plan& plan, const std::vector<const char*>& kernel_paths, std::FILE* f) const;

 private:
  // Adds the current counts to the earlier ones (same op count).
  void fold_into_earlier();

  bool on_ = false;
  uint64_t runs_ = 0, earlierRuns_ = 0;
  std::vector<double> totalUs_, minUs_, earlierTotalUs_, earlierMinUs_;
  std::vector<uint64_t> calls_, earlierCalls_;
};

}  // namespace memlane::cpu
