// Elementwise float math: the loops are simple enough for the compiler to vectorise (sqrt,
// div, abs, neg); exp and the Elu family's exp use vmath's polynomial; log, trigonometry,
// Softplus and general pow go through libm.
#include "cpu/elementwise_math.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "cpu/kernel.h"
#include "cpu/vmath.h"

namespace memlane::cpu {

namespace {

// y = x > 0 ? scale_pos * x : scale_neg * (exp(x / div) - 1), the Elu family, in chunks so that
// exp runs vectorised (vmath) and x may equal y.
void exp_linear_unit(const float* x, float* y, int64_t n, float scale_pos, float scale_neg, float div) {
  constexpr int64_t kChunk = 256;
  float e[kChunk];
  const float inv = 1.f / div;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t m = std::min(kChunk, n - b);
    for (int64_t i = 0; i < m; ++i) e[i] = std::min(x[b + i], 0.f) * inv;  // exp never overflows
    vmath::exp(e, e, m);
    for (int64_t i = 0; i < m; ++i) {
      const float v = x[b + i];
      y[b + i] = v > 0.f ? scale_pos * v : scale_neg * (e[i] - 1.f);
    }
  }
}

// log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
inline float softplus1(float v) { return std::max(v, 0.f) + std::log1p(std::exp(-std::fabs(v))); }

}  // namespace

void math_apply(MathFn f, const float* x, float* y, int64_t n, const MathParams& p) {
  switch (f) {
    case MathFn::kSqrt: for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]); break;
    case MathFn::kReciprocal: for (int64_t i = 0; i < n; ++i) y[i] = 1.f / x[i]; break;
    case MathFn::kExp: vmath::exp(x, y, n); break;
    case MathFn::kNeg: for (int64_t i = 0; i < n; ++i) y[i] = -x[i]; break;
    case MathFn::kLog: for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]); break;
    case MathFn::kAbs: for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]); break;
    // libm's: RoPE evaluates them once a call on [batch, seq, head_dim], not per layer; the
    // others are rare enough (YOSO's Acos) that accuracy wins over speed.
    case MathFn::kSin: for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]); break;
    case MathFn::kCos: for (int64_t i = 0; i < n; ++i) y[i] = std::cos(x[i]); break;
    case MathFn::kTan: for (int64_t i = 0; i < n; ++i) y[i] = std::tan(x[i]); break;
    case MathFn::kAsin: for (int64_t i = 0; i < n; ++i) y[i] = std::asin(x[i]); break;
    case MathFn::kAcos: for (int64_t i = 0; i < n; ++i) y[i] = std::acos(x[i]); break;
    case MathFn::kAtan: for (int64_t i = 0; i < n; ++i) y[i] = std::atan(x[i]); break;
    case MathFn::kSinh: for (int64_t i = 0; i < n; ++i) y[i] = std::sinh(x[i]); break;
    case MathFn::kCosh: for (int64_t i = 0; i < n; ++i) y[i] = std::cosh(x[i]); break;
    case MathFn::kAsinh: for (int64_t i = 0; i < n; ++i) y[i] = std::asinh(x[i]); break;
    case MathFn::kAcosh: for (int64_t i = 0; i < n; ++i) y[i] = std::acosh(x[i]); break;
    case MathFn::kAtanh: for (int64_t i = 0; i < n; ++i) y[i] = std::atanh(x[i]); break;
    case MathFn::kElu: exp_linear_unit(x, y, n, 1.f, p.alpha, 1.f); break;
    case MathFn::kSelu: exp_linear_unit(x, y, n, p.gamma, p.gamma * p.alpha, 1.f); break;
    // Celu = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): Elu of x / alpha, scaled.
    case MathFn::kCelu: exp_linear_unit(x, y, n, 1.f, p.alpha, p.alpha); break;
    case MathFn::kSoftplus: for (int64_t i = 0; i < n; ++i) y[i] = softplus1(x[i]); break;
    case MathFn::kSoftsign: for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.f + std::fabs(x[i])); break;
    case MathFn::kMish: for (int64_t i = 0; i < n; ++i) y[i] = x[i] * std::tanh(softplus1(x[i])); break;
    case MathFn::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > p.alpha ? x[i] : 0.f;
      break;
  }
}

void pow_scalar(const float* x, float* y, int64_t n, float e) {
  if (e == 1.f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
  } else if (e == 2.f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
  } else if (e == 3.f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i] * x[i];
  } else if (e == 0.5f) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
  } else if (e == -1.f) {
    for (int64_t i = 0; i < n; ++i) y[i] = 1.f / x[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = std::pow(x[i], e);
  }
}

namespace {

class MathKernel final : public Kernel {
 public:
  bool is_pow = false;
  MathFn fn = MathFn::kSqrt;
  float exponent = 1.f;
  MathParams params;
  TensorRef x, y;
  int64_t per_sample = 0;
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    c.pool->parallel_for(per_sample * c.batch, 16384, [&](int64_t b, int64_t e) {
      if (is_pow) pow_scalar(X + b, Y + b, e - b, exponent);
      else math_apply(fn, X + b, Y + b, e - b, params);
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_math(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight()) return unsupported(op, "input must be an activation", st, msg);
  if (X.elements() != Y.elements())
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ", st, msg);
  auto k = std::make_unique<MathKernel>();
  switch (op.type) {
    case OpType::kPow: k->is_pow = true; k->exponent = op.attrs.exponent; break;
    case OpType::kSqrt: k->fn = MathFn::kSqrt; break;
    case OpType::kReciprocal: k->fn = MathFn::kReciprocal; break;
    case OpType::kExp: k->fn = MathFn::kExp; break;
    case OpType::kNeg: k->fn = MathFn::kNeg; break;
    case OpType::kLog: k->fn = MathFn::kLog; break;
    case OpType::kAbs: k->fn = MathFn::kAbs; break;
    case OpType::kSin: k->fn = MathFn::kSin; break;
    case OpType::kCos: k->fn = MathFn::kCos; break;
    case OpType::kTan: k->fn = MathFn::kTan; break;
    case OpType::kAsin: k->fn = MathFn::kAsin; break;
    case OpType::kAcos: k->fn = MathFn::kAcos; break;
    case OpType::kAtan: k->fn = MathFn::kAtan; break;
    case OpType::kSinh: k->fn = MathFn::kSinh; break;
    case OpType::kCosh: k->fn = MathFn::kCosh; break;
    case OpType::kAsinh: k->fn = MathFn::kAsinh; break;
    case OpType::kAcosh: k->fn = MathFn::kAcosh; break;
    case OpType::kAtanh: k->fn = MathFn::kAtanh; break;
    case OpType::kElu: k->fn = MathFn::kElu; break;
    case OpType::kSelu: k->fn = MathFn::kSelu; break;
    case OpType::kCelu: k->fn = MathFn::kCelu; break;
    case OpType::kSoftplus: k->fn = MathFn::kSoftplus; break;
    case OpType::kSoftsign: k->fn = MathFn::kSoftsign; break;
    case OpType::kMish: k->fn = MathFn::kMish; break;
    case OpType::kThresholdedRelu: k->fn = MathFn::kThresholdedRelu; break;
    default: return unsupported(op, "not an elementwise math op", st, msg);
  }
  k->params = MathParams{op.attrs.alpha, op.attrs.gamma};
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->per_sample = X.elements();
  return k;
}

}  // namespace memlane::cpu
