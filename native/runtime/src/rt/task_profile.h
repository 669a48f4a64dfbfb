// The per-op profile of `infer.native` (args.profile, docs/profiling.md): taken after the
// timed calls, in calls of its own, so that timing every op never touches the latency figures.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "memlane/runtime.h"
#include "rt/task_ctx.h"

namespace memlane::rt {

// With args.profile true: `profileIterations` (default `iterations`) calls of `call(i)` at the
// batch index of args.profileBatch (default the first batch size) with per-op timing on, after
// one untimed call. Returns the result value's "profile": {batch, runs, wallMsMean, ops: [{name,
// opType, fused, totalMs, minMs, calls}]}, or {unavailable: why} where the backend cannot time its ops;
// nothing without args.profile.
std::optional<Val> profile_ops(const TaskCtx& c, Runtime& rt, const std::vector<int64_t>& batchSizes, int64_t iterations,
                const std::function<void(size_t)>& call);

}  // namespace memlane::rt
