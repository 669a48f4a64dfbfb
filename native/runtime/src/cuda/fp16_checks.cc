// fp16 setting: float32 activations are stored as half, which holds integers exactly only up
// to 2048. A plan that carries integers in a float32 tensor (Cast int -> float32, some
// math, Cast back to int64/int32: exported size and index arithmetic) would get other
// integers than the CPU backend once a value passes 2048, silently. Such a plan is refused
// at prepare, naming both Casts, rather than kept in float32 per tensor (the arena has one
// float element size; a mixed arena is a larger change than this case is worth). Integers
// cast to float that stay float (BERT's 0/1 attention mask scaled to -FLT_MAX) are not
// affected: their rounding is that of any float in the fp16 setting.
#include "forward.h"

#include <vector>

namespace memlane::cuda {

Status check_fp16_integers(const Plan& plan, std::string* message) {
  // For each float32 tensor, the Cast op that brought integers into it (-1: none), followed
  // through every op in plan order (ops are topologically sorted).
  std::vector<int> from(plan.tensors.size(), -1);
  for (size_t k = 0; k < plan.ops.size(); ++k) {
    const Op& op = plan.ops[k];
    int origin = -1;
    bool intIn = false;
    for (int32_t id : op.inputs) {
      if (id == kAbsentInput) continue;
      if (plan.tensors[size_t(id)].dtype != DType::kFloat32) intIn = true;
      else if (origin < 0 && from[size_t(id)] >= 0) origin = from[size_t(id)];
    }
    if (op.type == OpType::kCast && !op.inputs.empty() && !op.outputs.empty()) {
      const DType to = plan.tensors[size_t(op.outputs[0])].dtype;
      if (intIn && to == DType::kFloat32) {
        from[size_t(op.outputs[0])] = int(k);
        continue;
      }
      // To bool is safe: no integer rounds to zero in half (large ones saturate at 65504).
      if (origin >= 0 && (to == DType::kInt64 || to == DType::kInt32)) {
        const Op& src = plan.ops[size_t(origin)];
        *message = "fp16: op Cast '" + op.name + "' turns float32 '" + plan.tensors[size_t(op.inputs[0])].name +
                   "' back into " + dtype_name(to) + ", and that tensor carries integers from op Cast '" + src.name +
                   "' (" + dtype_name(plan.tensors[size_t(src.inputs[0])].dtype) +
                   " -> float32); half holds integers exactly only up to 2048, so the result could differ from "
                   "the CPU backend's: run this plan with fp16 off";
        return Status::kUnsupportedOp;
      }
    }
    if (origin < 0) continue;
    for (int32_t id : op.outputs)
      if (id != kAbsentInput && plan.tensors[size_t(id)].dtype == DType::kFloat32) from[size_t(id)] = origin;
  }
  return Status::kOk;
}

}  // namespace memlane::cuda
