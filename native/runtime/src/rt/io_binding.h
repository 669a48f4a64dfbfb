// Binds a task's tensors to the loaded plan's graph inputs and names its outputs, per the
// multi-input contract (docs/worker-tasks.md): `input:<onnx name>` tensors, batch first on the
// wire, answered with `output:<onnx name>`; or the legacy single "inputs" / "outputs" pair.
#pragma once

#include <string>
#include <vector>

#include "rt/task_ctx.h"

namespace memlane::rt {

struct IoBinding {
  bool legacy = false;                  // "inputs" in, "outputs" (the first graph output) out
  std::vector<const InTensor*> inputs;  // in the plan's input order
  int64_t rows = 0;                     // rows (batch-first) every input has
};

// Refuses (TaskError) a missing input, one of another dtype or non-batch shape (SHAPE_MISMATCH
// naming the input, expected and received, or listing the plan's shape profiles), args.io that
// disagrees with the plan, and NaN. Makes the profile the inputs match the runtime's active one.
IoBinding bind_inputs(const TaskCtx& c, Runtime& rt);

// The name an output travels under.
inline std::string output_name(const IoBinding& b, const TensorSpec& o) { return b.legacy ? "outputs" : "output:" + o.name; }

// Rows [r0, r0 + n) of every input, tiled past the end, in the plan's layout (batch moved to
// its axis); `store` keeps copies alive, and rows already contiguous in place are not copied.
std::vector<const float*> plan_inputs(const IoBinding& b, const Runtime& rt, int64_t r0, int64_t n,
                                      std::vector<std::vector<uint64_t>>& store);

}  // namespace memlane::rt
