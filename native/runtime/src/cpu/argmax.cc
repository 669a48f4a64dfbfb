// ArgMax along one axis of a float32, int64 or int32 tensor, into int64 indices: CLIP's text
// encoder pools at argmax(input_ids == eos) of each sequence. The first maximum wins, or the
// last with ONNX's select_last_index; keepdims only changes the output's plan shape, not its
// elements. The compiler refuses the batch axis (a result per sample, never across them).
#include <algorithm>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

template <typename T>
class ArgMaxKernel final : public Kernel {
 public:
  TensorRef x, y;
  TensorInfo info;  // the input's plan shape (-k = k x batch)
  int axis = 0;
  bool last = false;
  void run(const RunCtx& c) const override {
    const AxisSplit a = split_at_axis(info.resolved(c.batch), axis);
    const int64_t outer = a.outer, len = a.len, inner = a.inner;
    const T* X = x.as<T>(c);
    int64_t* Y = y.as<int64_t>(c);
    c.pool->parallel_for(outer * inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)), [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const T* xs = X + (u / inner) * len * inner + u % inner;
        int64_t best = 0;
        T top = xs[0];
        for (int64_t j = 1; j < len; ++j) {
          const T v = xs[j * inner];
          if (v > top || (last && v == top)) { top = v; best = j; }
        }
        Y[u] = best;
      }
    });
  }
};

template <typename T>
std::unique_ptr<Kernel> build(const BuildCtx& bc, const Op& op) {
  auto k = std::make_unique<ArgMaxKernel<T>>();
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->info.shape = bc.info(op.inputs[0]).shape;
  k->axis = op.attrs.axis;
  k->last = op.attrs.lastIndex;
  return k;
}

}  // namespace

std::unique_ptr<Kernel> make_argmax(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo &X = bc.info(op.inputs[0]), &Y = bc.info(op.outputs[0]);
  if (X.is_weight()) return unsupported(op, "input '" + X.name + "' is a weight; ArgMax takes a tensor computed at run time", st, msg);
  if (X.dtype != DType::kFloat32 && X.dtype != DType::kInt64 && X.dtype != DType::kInt32)
    return unsupported(op, std::string("input is ") + dtype_name(X.dtype) + "; ArgMax compares float32, int64 or int32", st, msg);
  if (op.attrs.axis < 0 || op.attrs.axis >= int(X.shape.size()) || X.shape[size_t(op.attrs.axis)] < 0)
    return unsupported(op, "axis " + std::to_string(op.attrs.axis) + " is out of range or the batch of " + shape_str(X.shape), st, msg);
  if (Y.dtype != DType::kInt64 || Y.elements() * X.shape[size_t(op.attrs.axis)] != X.elements())
    return unsupported(op, "output " + shape_str(Y.shape) + " " + dtype_name(Y.dtype) + " is not int64 indices of " + shape_str(X.shape) +
                               " along axis " + std::to_string(op.attrs.axis), st, msg);
  switch (X.dtype) {
    case DType::kFloat32: return build<float>(bc, op);
    case DType::kInt64: return build<int64_t>(bc, op);
    default: return build<int32_t>(bc, op);
  }
}

}  // namespace memlane::cpu
