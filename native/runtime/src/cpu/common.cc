#include <sstream>

#include "cpu/kernel.h"

namespace memlane::cpu {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}

bool bind_outputs(const BuildCtx& bc, const Op& op, const std::vector<OutputSlot>& slots, Status* st, std::string* msg) {
  if (op.outputs.size() > slots.size()) {
    unsupported(op, "expects at most " + std::to_string(slots.size()) + " outputs", st, msg);
    return false;
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (bc.info(op.outputs[i]).shape != slots[i].shape) {
      unsupported(op, "output " + std::to_string(i) + " must be " + shape_str(slots[i].shape) + ", found " +
                          shape_str(bc.info(op.outputs[i]).shape), st, msg);
      return false;
    }
    *slots[i].ref = bc.ref(op.outputs[i]);
    *slots[i].present = true;
  }
  return true;
}

bool need_inputs(const Op& op, size_t min, size_t max, Status* st, std::string* msg) {
  size_t present = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] != kAbsentInput) present = i + 1;
  if (op.inputs.size() < min || present > max || present < min) {
    unsupported(op, "expects " + std::to_string(min) + ".." + std::to_string(max) + " inputs, has " +
                        std::to_string(op.inputs.size()), st, msg);
    return false;
  }
  for (size_t i = 0; i < min; ++i)
    if (op.inputs[i] == kAbsentInput) {
      unsupported(op, "input " + std::to_string(i) + " is required", st, msg);
      return false;
    }
  return true;
}

void relu_inplace(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
}

}  // namespace memlane::cpu
