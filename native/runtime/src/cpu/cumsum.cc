// CumSum along one axis with ONNX's `exclusive` (each sum leaves its own element out) and
// `reverse` (sums run from the end) on float32, int64 or int32. RoBERTa-family embeddings
// number their positions cumsum(ids != pad) along the sequence.
//
// The sums run in order along the axis in the tensor's own type, as ONNX Runtime's do, so
// float results are its results bit for bit; integers are added as unsigned words, which wrap
// as two's complement where a signed overflow would be undefined. Along the batch axis the
// sums run over samples: the backend then runs the batch whole (cpu_backend.cc, `chunkable`).
#include <algorithm>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

// Columns of the inner dims one unit of work sums down the axis (a row of them stays in L1).
constexpr int64_t kColumns = 1024;

template <typename T>  // float, or uint64_t / uint32_t for int64 / int32
class CumSumKernel final : public Kernel {
 public:
  TensorRef x, y;
  TensorInfo info;  // plan shape (-k = k x batch)
  int axis = 0;
  bool exclusive = false, reverse = false;
  void run(const RunCtx& c) const override {
    const AxisSplit a = split_at_axis(info.resolved(c.batch), axis);
    const int64_t outer = a.outer, len = a.len, inner = a.inner, blocks = (inner + kColumns - 1) / kColumns;
    const T* X = x.as<T>(c);
    T* Y = y.as<T>(c);
    const int64_t work = len * std::min(inner, kColumns);
    c.pool->parallel_for(outer * blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(work, 1)), [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t o = u / blocks, c0 = (u % blocks) * kColumns, n = std::min(inner - c0, kColumns);
        const T* xs = X + o * len * inner + c0;
        T* ys = Y + o * len * inner + c0;
        for (int64_t s = 0; s < len; ++s) {
          // Step s of the sum is element j of the axis; the previous step was element p.
          const int64_t j = reverse ? len - 1 - s : s, p = reverse ? j + 1 : j - 1;
          T* yj = ys + j * inner;
          if (s == 0) {
            for (int64_t k = 0; k < n; ++k) yj[k] = exclusive ? T(0) : xs[j * inner + k];
            continue;
          }
          const T* add = xs + (exclusive ? p : j) * inner;
          const T* prev = ys + p * inner;
          for (int64_t k = 0; k < n; ++k) yj[k] = T(prev[k] + add[k]);
        }
      }
    });
  }
};

template <typename T>
std::unique_ptr<Kernel> build(const BuildCtx& bc, const Op& op) {
  auto k = std::make_unique<CumSumKernel<T>>();
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->info.shape = bc.info(op.inputs[0]).shape;
  k->axis = op.attrs.axis;
  k->exclusive = op.attrs.exclusive;
  k->reverse = op.attrs.reverse;
  return k;
}

}  // namespace

std::unique_ptr<Kernel> make_cumsum(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo &X = bc.info(op.inputs[0]), &Y = bc.info(op.outputs[0]);
  if (X.is_weight()) return unsupported(op, "input '" + X.name + "' is a weight; CumSum takes a tensor computed at run time", st, msg);
  if (X.dtype != DType::kFloat32 && X.dtype != DType::kInt64 && X.dtype != DType::kInt32)
    return unsupported(op, std::string("input is ") + dtype_name(X.dtype) + "; CumSum sums float32, int64 or int32", st, msg);
  if (op.attrs.axis < 0 || op.attrs.axis >= int(X.shape.size()))
    return unsupported(op, "axis " + std::to_string(op.attrs.axis) + " out of range for " + shape_str(X.shape), st, msg);
  if (Y.dtype != X.dtype || Y.shape != X.shape)
    return unsupported(op, "output " + shape_str(Y.shape) + " " + dtype_name(Y.dtype) + " differs from input " +
                               shape_str(X.shape) + " " + dtype_name(X.dtype), st, msg);
  switch (X.dtype) {
    case DType::kFloat32: return build<float>(bc, op);
    case DType::kInt64: return build<uint64_t>(bc, op);
    default: return build<uint32_t>(bc, op);
  }
}

}  // namespace memlane::cpu
