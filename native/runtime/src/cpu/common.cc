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
