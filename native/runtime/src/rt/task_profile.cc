#include "rt/task_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace memlane::rt {

namespace {
// Profiled calls a task may ask for: enough for a stable mean, few enough that a typo cannot
// keep a worker busy for hours.
constexpr int64_t kMaxProfileIterations = 100000;

// MEMLANE_PROFILE=1 (cpu_backend.cc) profiles the whole process and dumps at teardown. A task
// profile restarts the counters (the dump keeps the earlier ones, cpu/op_profiler.h);
// afterwards profiling goes back on for that dump instead of off.
bool process_profiling() {
  const char* p = std::getenv("MEMLANE_PROFILE");
  return p && *p == '1';
}
}  // namespace

std::optional<Val> profile_ops(const TaskCtx& c, Runtime& rt, const std::vector<int64_t>& batchSizes, int64_t iterations,
                const std::function<void(size_t)>& call) {
  if (!c.bool_arg("profile", false)) return std::nullopt;
  const int64_t batch = c.int_arg("profileBatch", batchSizes.front(), 1, 1 << 20);
  const auto at = std::find(batchSizes.begin(), batchSizes.end(), batch);
  if (at == batchSizes.end()) c.bad_arg("profileBatch", "one of batchSizes", std::to_string(batch));
  const size_t bi = size_t(at - batchSizes.begin());
  const int64_t runs = c.int_arg("profileIterations", std::min(iterations, kMaxProfileIterations), 1, kMaxProfileIterations);
  RtError err;
  if (!rt.set_profiling(true, &err)) return Val::map().set("batch", batch).set("unavailable", err.message);
  double wallMs = 0;
  try {
    call(bi);  // the profiled path may differ from the timed one (no batch lanes): warm it
    rt.set_profiling(true, &err);  // a fresh profile, without that call
    for (int64_t i = 0; i < runs; ++i) {
      c.check_cancel();
      const auto t0 = std::chrono::steady_clock::now();
      call(bi);
      wallMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  } catch (...) {
    rt.set_profiling(process_profiling(), &err);
    throw;
  }
  const OpProfile p = rt.op_profile();
  rt.set_profiling(process_profiling(), &err);
  Val ops = Val::array();
  for (const OpTiming& t : p.ops) {
    Val o = Val::map();
    o.set("name", t.name).set("opType", t.opType).set("totalMs", t.totalMs).set("minMs", t.minMs).set("calls", t.calls);
    if (!t.fused.empty()) o.set("fused", t.fused);
    if (!t.kernel.empty()) o.set("kernel", t.kernel);
    ops.push(std::move(o));
  }
  Val v = Val::map();
  v.set("batch", batch).set("runs", p.runs).set("wallMsMean", wallMs / double(runs)).set("ops", std::move(ops));
  return v;
}

}  // namespace memlane::rt
