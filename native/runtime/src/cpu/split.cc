// Split along one axis (>= 1) into several outputs: the inverse of Concat's copy.
#include <cstring>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"

namespace memlane::cpu {

void split_axis(const float* x, float* const* ys, int64_t outer, const int64_t* parts, int n_parts,
                int64_t inner) {
  int64_t row = 0;
  for (int k = 0; k < n_parts; ++k) row += parts[k] * inner;
  for (int64_t o = 0; o < outer; ++o) {
    const float* src = x + o * row;
    for (int k = 0; k < n_parts; ++k) {
      const int64_t n = parts[k] * inner;
      std::memcpy(ys[k] + o * n, src, sizeof(float) * size_t(n));
      src += n;
    }
  }
}

namespace {

constexpr size_t kMaxParts = 256;  // run() keeps the output pointers on the stack

class SplitKernel final : public Kernel {
 public:
  TensorRef x;
  std::vector<TensorRef> ys;
  std::vector<int64_t> parts;
  int64_t outer_per_sample = 1, inner = 1;
  void run(const RunCtx& c) const override {
    float* out[kMaxParts];
    for (size_t k = 0; k < ys.size(); ++k) out[k] = ys[k].at(c);
    split_axis(x.at(c), out, outer_per_sample * c.batch, parts.data(), int(parts.size()), inner);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_split(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const int axis = op.attrs.axis, r = int(X.shape.size());
  if (X.is_weight()) return unsupported(op, "input must be an activation", st, msg);
  if (axis < 1 || axis >= r) return unsupported(op, "axis " + std::to_string(axis) + " out of range for " + shape_str(X.shape), st, msg);
  if (op.attrs.split.size() != op.outputs.size())
    return unsupported(op, "split has " + std::to_string(op.attrs.split.size()) + " sizes for " +
                               std::to_string(op.outputs.size()) + " outputs", st, msg);
  if (op.outputs.size() > kMaxParts) return unsupported(op, "more than 256 outputs", st, msg);
  auto k = std::make_unique<SplitKernel>();
  // A first axis of k·batch (-k: windows merged into the batch, Swin's) is k rows a sample.
  if (X.shape[0] < -1) k->outer_per_sample = -X.shape[0];
  for (int i = 1; i < axis; ++i) k->outer_per_sample *= X.shape[i];
  for (int i = axis + 1; i < r; ++i) k->inner *= X.shape[i];
  int64_t total = 0;
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    const TensorInfo& Y = bc.info(op.outputs[j]);
    const int64_t part = op.attrs.split[j];
    bool fits = int(Y.shape.size()) == r && part >= 0 && Y.shape[axis] == part;
    for (int i = 1; fits && i < r; ++i) fits = i == axis || Y.shape[i] == X.shape[i];
    if (!fits) return unsupported(op, "output " + shape_str(Y.shape) + " is not part " + std::to_string(part) +
                                          " of " + shape_str(X.shape) + " along axis " + std::to_string(axis), st, msg);
    k->ys.push_back(bc.ref(op.outputs[j]));
    k->parts.push_back(part);
    total += part;
  }
  if (total != X.shape[axis]) return unsupported(op, "split sizes add up to " + std::to_string(total) + ", not " +
                                                         std::to_string(X.shape[axis]), st, msg);
  k->x = bc.ref(op.inputs[0]);
  return k;
}

}  // namespace memlane::cpu
