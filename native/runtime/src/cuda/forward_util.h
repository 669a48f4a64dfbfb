// Helpers shared by the forward pass's files: forward.cc (the v1 float ops: conv, GEMM,
// pools, transformer ops) and forward_data.cc (plan v2 data ops and the ops of any dtype).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data_kernels.h"
#include "forward.h"

namespace memlane::cuda {

const char* op_name(OpType t);  // memlane_cuda's own table (no link to memlane_core)
Status unsupported(const Op& op, const std::string& why, std::string* message);
std::string shape_str(const std::vector<int64_t>& s);

// A tensor's dims for a batch of `batch` (the batch at any axis; weights unchanged).
inline std::vector<int64_t> dims_of(const TensorInfo& t, int64_t batch) {
  return t.is_weight() ? t.shape : t.resolved(batch);
}
inline int64_t prod(const std::vector<int64_t>& d, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < d.size() && i < to; ++i) n *= d[i];
  return n;
}

// Present inputs in [min, max], the first `min` of them present (the CPU's need_inputs()).
inline bool has_inputs(const Op& op, size_t min, size_t max) {
  size_t present = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] != kAbsentInput) present = i + 1;
  if (op.inputs.size() < min || present < min || present > max) return false;
  for (size_t i = 0; i < min; ++i)
    if (op.inputs[i] == kAbsentInput) return false;
  return true;
}

// How a tensor of dtype t is stored on the device: float32 in the precision, others as is.
inline Elem elem_of(DType t, Prec p) {
  switch (t) {
    case DType::kFloat32: return p == Prec::kF16 ? Elem::kF16 : Elem::kF32;
    case DType::kInt64: return Elem::kI64;
    case DType::kInt32: return Elem::kI32;
    default: return Elem::kU8;
  }
}

// forward_data_checks.cc / forward_data.cc: the ops that take any dtype and the batch at any
// axis (the CPU backend's dtype- and layout-aware kernels), checked and run there.
bool is_data_op(OpType t);
bool is_binary_op(OpType t);  // the two-input element-wise ops among them
// The contract of every other (float) kernel, as cpu_backend.cc's v1_kernel_fits: float32
// tensors, and the batch first except for the element-wise and row ops.
Status check_float_layout(const Plan& plan, const Op& op, std::string* message);
Status check_data_op(const Plan& plan, const Op& op, std::string* message);
Status run_data_op(const ForwardEnv& env, const Op& op, int64_t batch, cudaStream_t s, bool dry, std::string* message);

}  // namespace memlane::cuda
