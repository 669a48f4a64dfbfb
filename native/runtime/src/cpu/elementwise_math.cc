// Elementwise float math: the loops are simple enough for the compiler to vectorise (sqrt,
// div, abs, neg); exp uses vmath's polynomial; log and general pow go through libm.
#include "cpu/elementwise_math.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "cpu/kernel.h"
#include "cpu/vmath.h"

namespace memlane::cpu {

void math_apply(MathFn f, const float* x, float* y, int64_t n) {
  switch (f) {
    case MathFn::kSqrt: for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]); break;
    case MathFn::kReciprocal: for (int64_t i = 0; i < n; ++i) y[i] = 1.f / x[i]; break;
    case MathFn::kExp: vmath::exp(x, y, n); break;
    case MathFn::kNeg: for (int64_t i = 0; i < n; ++i) y[i] = -x[i]; break;
    case MathFn::kLog: for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]); break;
    case MathFn::kAbs: for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]); break;
    // libm's: RoPE evaluates them once a call on [batch, seq, head_dim], not per layer.
    case MathFn::kSin: for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]); break;
    case MathFn::kCos: for (int64_t i = 0; i < n; ++i) y[i] = std::cos(x[i]); break;
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
  TensorRef x, y;
  int64_t per_sample = 0;
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    c.pool->parallel_for(per_sample * c.batch, 16384, [&](int64_t b, int64_t e) {
      if (is_pow) pow_scalar(X + b, Y + b, e - b, exponent);
      else math_apply(fn, X + b, Y + b, e - b);
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
    default: return unsupported(op, "not an elementwise math op", st, msg);
  }
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->per_sample = X.elements();
  return k;
}

}  // namespace memlane::cpu
