// LayerNormalization: two passes over each row (mean, then the variance of the deviations,
// which stays accurate when the mean is large against the spread, unlike E[x^2] - E[x]^2),
// then one fused scale-and-shift pass. Eight partial sums keep the reductions vectorised
// without -ffast-math.
#include "cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "cpu/kernel.h"
#include "cpu/simd/avx512.h"

namespace memlane::cpu {
namespace {

constexpr int kLanes = 8;

float row_sum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  float s = 0.f;
  for (; i < n; ++i) s += x[i];
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

float row_sq_dev(const float* x, int64_t n, float mean) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float d = x[i + l] - mean;
      acc[l] += d * d;
    }
  float s = 0.f;
  for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

class LayerNormKernel final : public Kernel {
 public:
  TensorRef x, y;
  const float* scale = nullptr;
  const float* bias = nullptr;
  int64_t rows_per_sample = 1, n = 1;
  float eps = 1e-5f;
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t rows = rows_per_sample * c.batch;
    c.pool->parallel_for(rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
      layernorm_rows(X + r0 * n, Y + r0 * n, r1 - r0, n, scale, bias, eps);
    });
  }
};

}  // namespace

void layernorm_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps) {
  if (simd::have_avx512()) {
    simd::layernorm_rows(x, y, rows, n, scale, bias, eps);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mean = row_sum(xr, n) / float(n);
    const float inv = 1.f / std::sqrt(row_sq_dev(xr, n, mean) / float(n) + eps);
    if (bias)
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * inv * scale[i] + bias[i];
    else
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * inv * scale[i];
  }
}

std::unique_ptr<Kernel> make_layernorm(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 3, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& S = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const int axis = op.attrs.axis, r = int(X.shape.size());
  // Rows of the trailing axes: the batch may sit on any axis before `axis`.
  if (X.is_weight() || axis < 1 || axis >= r || X.batch_axis() >= axis)
    return unsupported(op, "needs an activation with its batch before axis, 1 <= axis < rank; X " + shape_str(X.shape) + ", axis " +
                               std::to_string(axis), st, msg);
  if (Y.elements() != X.elements())
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ", st, msg);
  auto k = std::make_unique<LayerNormKernel>();
  for (int i = axis; i < r; ++i) k->n *= X.shape[i];
  k->rows_per_sample = X.elements() / k->n;
  if (!S.is_weight() || S.elements() != k->n)
    return unsupported(op, "scale must be a weight of the normalised size " + std::to_string(k->n) + ", found " +
                               shape_str(S.shape), st, msg);
  k->scale = S.data;
  if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput) {
    const TensorInfo& B = bc.info(op.inputs[2]);
    if (!B.is_weight() || B.elements() != k->n)
      return unsupported(op, "bias must be a weight of the normalised size " + std::to_string(k->n) + ", found " +
                                 shape_str(B.shape), st, msg);
    k->bias = B.data;
  }
  k->eps = op.attrs.epsilon;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
