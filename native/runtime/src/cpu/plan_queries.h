// Questions the load-time fusions ask of a plan before folding one op into another
// (cpu_backend.cc's conv epilogues, gemm_epilogue.cc's MatMul epilogues), and kernels of the
// op before theirs (conv.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan/plan.h"

namespace memlane::cpu {

// True when tensor `id` is a graph output or read by an op other than `except`: folding its
// producer away would then lose a value someone needs.
inline bool read_elsewhere(const Plan& plan, int32_t id, size_t except) {
  for (int32_t o : plan.outputs)
    if (o == id) return true;
  for (size_t i = 0; i < plan.ops.size(); ++i)
    if (i != except)
      for (int32_t in : plan.ops[i].inputs)
        if (in == id) return true;
  return false;
}

// The output of the Relu at ops[i] when that op exists, reads tensor `t` alone and `t` is read
// nowhere else (a fusion may then end at the Relu); -1 otherwise.
inline int32_t trailing_relu(const Plan& plan, size_t i, int32_t t) {
  if (i >= plan.ops.size()) return -1;
  const Op& r = plan.ops[i];
  if (r.type != OpType::kRelu || r.inputs.size() != 1 || r.inputs[0] != t || r.outputs.size() != 1) return -1;
  return read_elsewhere(plan, t, i) ? -1 : r.outputs[0];
}

// The op that writes tensor `id`; nullptr for a graph input or a weight.
inline const Op* producer(const Plan& plan, int32_t id) {
  for (const Op& op : plan.ops)
    for (int32_t o : op.outputs)
      if (o == id) return &op;
  return nullptr;
}

// True when two tensors share arena bytes (the planner reuses memory between lifetimes).
inline bool overlaps(const TensorInfo& a, const TensorInfo& b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

}  // namespace memlane::cpu
