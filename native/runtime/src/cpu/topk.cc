// TopK along one axis of a float32, int64 or int32 tensor: the k largest (or smallest) values
// of each row, sorted, and their int64 indices. Equal values keep the lower index first (ONNX's
// rule since opset 11); a NaN ranks above every number, as ONNX Runtime orders it. A
// classifier's top-5 exported with the model, a detector's or recommender's candidates.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

template <typename T>
class TopKKernel final : public Kernel {
 public:
  TensorRef x, values, indices;
  TensorInfo info;  // the input's plan shape (-k = k x batch)
  int axis = 0;
  int64_t k = 1;
  bool largest = true;
  void run(const RunCtx& c) const override {
    const AxisSplit a = split_at_axis(info.resolved(c.batch), axis);
    const int64_t outer = a.outer, len = a.len, inner = a.inner;
    const T* X = x.as<T>(c);
    T* V = values.as<T>(c);
    int64_t* I = indices.as<int64_t>(c);
    // a before b: the larger (or smaller) value, NaN first for largest, then the lower index.
    const auto before = [&](const T* xs, int64_t a, int64_t b) {
      const T va = xs[a * inner], vb = xs[b * inner];
      const bool na = is_nan(va), nb = is_nan(vb);
      if (na || nb) return na && !nb ? largest : !na && nb ? !largest : a < b;
      if (va != vb) return largest ? va > vb : va < vb;
      return a < b;
    };
    c.pool->parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)), [&](int64_t u0, int64_t u1) {
      std::vector<int64_t> order(static_cast<size_t>(len));
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t o = u / inner, in = u % inner;
        const T* xs = X + o * len * inner + in;
        for (int64_t j = 0; j < len; ++j) order[size_t(j)] = j;
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) { return before(xs, a, b); });
        T* vs = V + o * k * inner + in;
        int64_t* is = I + o * k * inner + in;
        for (int64_t j = 0; j < k; ++j) {
          vs[j * inner] = xs[order[size_t(j)] * inner];
          is[j * inner] = order[size_t(j)];
        }
      }
    });
  }
};

template <typename T>
std::unique_ptr<Kernel> build(const BuildCtx& bc, const Op& op) {
  auto k = std::make_unique<TopKKernel<T>>();
  k->x = bc.ref(op.inputs[0]);
  k->values = bc.ref(op.outputs[0]);
  k->indices = bc.ref(op.outputs[1]);
  k->info.shape = bc.info(op.inputs[0]).shape;
  k->axis = op.attrs.axis;
  k->k = op.attrs.k;
  k->largest = op.attrs.largest;
  return k;
}

}  // namespace

std::unique_ptr<Kernel> make_topk(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  if (op.outputs.size() != 2) return unsupported(op, "expects 2 outputs (values, indices)", st, msg);
  const TensorInfo &X = bc.info(op.inputs[0]), &V = bc.info(op.outputs[0]), &I = bc.info(op.outputs[1]);
  if (X.is_weight()) return unsupported(op, "input '" + X.name + "' is a weight; TopK takes a tensor computed at run time", st, msg);
  if (X.dtype != DType::kFloat32 && X.dtype != DType::kInt64 && X.dtype != DType::kInt32)
    return unsupported(op, std::string("input is ") + dtype_name(X.dtype) + "; TopK compares float32, int64 or int32", st, msg);
  const int axis = op.attrs.axis;
  if (axis < 0 || axis >= int(X.shape.size()) || X.shape[size_t(axis)] < 0)
    return unsupported(op, "axis " + std::to_string(axis) + " is out of range or the batch of " + shape_str(X.shape), st, msg);
  if (op.attrs.k < 1 || op.attrs.k > X.shape[size_t(axis)])
    return unsupported(op, "k " + std::to_string(op.attrs.k) + " is not in 1.." + std::to_string(X.shape[size_t(axis)]), st, msg);
  std::vector<int64_t> want = X.shape;
  want[size_t(axis)] = op.attrs.k;
  if (V.shape != want || I.shape != want || V.dtype != X.dtype || I.dtype != DType::kInt64)
    return unsupported(op, "outputs must be " + shape_str(want) + " values of the input's dtype and int64 indices", st, msg);
  switch (X.dtype) {
    case DType::kFloat32: return build<float>(bc, op);
    case DType::kInt64: return build<int64_t>(bc, op);
    default: return build<int32_t>(bc, op);
  }
}

}  // namespace memlane::cpu
