// Clip (ReLU6 and friends), HardSigmoid, HardSwish and SiLU (x * sigmoid(x), the fusion of
// the Sigmoid + Mul pair exporters emit for nn.SiLU), elementwise.
#include <algorithm>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"
#include "cpu/vmath.h"

namespace memlane::cpu {

void clip(const float* x, float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], lo), hi);
}

// GCC turns the clamp inside these two into branches rather than vector min/max, which cost
// a HardSwish 10x a Clip of the same size: AVX2 lanes where available, the same formula after.
void hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta) {
  int64_t i = 0;
#if MEMLANE_VMATH_AVX2
  const __m256 a = _mm256_set1_ps(alpha), b = _mm256_set1_ps(beta), zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(_mm256_loadu_ps(x + i), a, b), zero), one));
#endif
  for (; i < n; ++i) y[i] = std::min(std::max(alpha * x[i] + beta, 0.f), 1.f);
}

void hard_swish(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if MEMLANE_VMATH_AVX2
  const __m256 a = _mm256_set1_ps(1.f / 6.f), b = _mm256_set1_ps(0.5f), zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v, a, b), zero), one)));
  }
#endif
  for (; i < n; ++i) y[i] = x[i] * std::min(std::max(x[i] * (1.f / 6.f) + 0.5f, 0.f), 1.f);
}

void silu(const float* x, float* y, int64_t n) {
  vmath::sigmoid(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] *= x[i];
}

namespace {

class ClipHardKernel final : public Kernel {
 public:
  OpType type = OpType::kClip;
  TensorRef x, y;
  int64_t per_sample = 0;
  float a = 0.f, b = 0.f;  // Clip: lo, hi; HardSigmoid: alpha, beta
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t grain = type == OpType::kSiLU ? 8192 : 65536;
    c.pool->parallel_for(per_sample * c.batch, grain, [&](int64_t i0, int64_t i1) {
      const float* xs = X + i0;
      float* ys = Y + i0;
      const int64_t n = i1 - i0;
      switch (type) {
        case OpType::kClip: clip(xs, ys, n, a, b); break;
        case OpType::kHardSigmoid: hard_sigmoid(xs, ys, n, a, b); break;
        case OpType::kHardSwish: hard_swish(xs, ys, n); break;
        default: silu(xs, ys, n); break;
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_clip_hard(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight()) return unsupported(op, "input must be an activation", st, msg);
  if (X.elements() != Y.elements())
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ", st, msg);
  if (op.type == OpType::kClip && !(op.attrs.clipMin <= op.attrs.clipMax))
    return unsupported(op, "min " + std::to_string(op.attrs.clipMin) + " > max " + std::to_string(op.attrs.clipMax), st, msg);
  auto k = std::make_unique<ClipHardKernel>();
  k->type = op.type;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->per_sample = X.elements();
  k->a = op.type == OpType::kClip ? op.attrs.clipMin : op.attrs.alpha;
  k->b = op.type == OpType::kClip ? op.attrs.clipMax : op.attrs.beta;
  return k;
}

}  // namespace memlane::cpu
