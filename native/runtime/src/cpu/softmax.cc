// Softmax and LogSoftmax along one axis (ONNX opset >= 13 semantics; the compiler normalised
// the axis).
#include <algorithm>
#include <cmath>

#include "cpu/kernel.h"
#include "cpu/simd/avx512.h"
#include "cpu/vmath.h"

namespace memlane::cpu {
namespace {

class SoftmaxKernel final : public Kernel {
 public:
  TensorRef x, y;
  int64_t outer_per_sample = 1, len = 1, inner_per_sample = 1;
  bool batch_inner = false;  // the batch sits after the softmax axis (scales inner, not outer)
  bool log = false;          // LogSoftmax: y = x - max - log(sum exp(x - max))
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t outer = batch_inner ? outer_per_sample : outer_per_sample * c.batch;
    const int64_t inner = batch_inner ? inner_per_sample * c.batch : inner_per_sample;
    c.pool->parallel_for(outer * inner, std::max<int64_t>(1, 4096 / len), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / inner, i = r % inner;
        const float* xr = X + o * len * inner + i;
        float* yr = Y + o * len * inner + i;
        if (log) {  // reads x to the end, so y may be x
          float m = xr[0];
          for (int64_t j = 1; j < len; ++j) m = std::max(m, xr[j * inner]);
          float s = 0.f;
          for (int64_t j = 0; j < len; ++j) s += vmath::exp1(xr[j * inner] - m);
          const float shift = m + std::log(s);
          for (int64_t j = 0; j < len; ++j) yr[j * inner] = xr[j * inner] - shift;
          continue;
        }
        if (inner == 1 && simd::have_avx512()) {  // contiguous row: two 16-lane passes and a scale
          if (yr != xr) std::copy(xr, xr + len, yr);
          simd::scale_row(yr, len, 1.f / simd::softmax_row_unnormalised(yr, len, 1.f, nullptr, 0));
          continue;
        }
        float m = xr[0];
        for (int64_t j = 1; j < len; ++j) m = std::max(m, xr[j * inner]);
        float s = 0.f;
        if (inner == 1) {  // contiguous row: vector exp
          for (int64_t j = 0; j < len; ++j) yr[j] = xr[j] - m;
          vmath::exp(yr, yr, len);
          for (int64_t j = 0; j < len; ++j) s += yr[j];
        } else {
          for (int64_t j = 0; j < len; ++j) {
            const float v = vmath::exp1(xr[j * inner] - m);
            yr[j * inner] = v;
            s += v;
          }
        }
        const float inv = 1.f / s;
        for (int64_t j = 0; j < len; ++j) yr[j * inner] *= inv;
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_softmax(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const int axis = op.attrs.axis, r = int(X.shape.size());
  if (bc.info(op.outputs[0]).elements() != X.elements())
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(bc.info(op.outputs[0]).shape) + " differ", st, msg);
  const int bax = X.batch_axis();
  if (X.is_weight() || axis < 0 || axis >= r || axis == bax)
    return unsupported(op, "axis " + std::to_string(axis) + " out of range for " + shape_str(X.shape) +
                               " (or the batch axis)", st, msg);
  auto k = std::make_unique<SoftmaxKernel>();
  // Per-sample extents: a batch entry -k counts k; the batch scales the side it is on.
  for (int i = 0; i < axis; ++i) k->outer_per_sample *= X.shape[i] < 0 ? -X.shape[i] : X.shape[i];
  k->len = X.shape[axis];
  for (int i = axis + 1; i < r; ++i) k->inner_per_sample *= X.shape[i] < 0 ? -X.shape[i] : X.shape[i];
  k->batch_inner = bax > axis;
  k->log = op.type == OpType::kLogSoftmax;
  if (k->len < 1) return unsupported(op, "empty softmax axis", st, msg);
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
