// Elementwise float math on activations (plain functions over raw pointers): Sqrt,
// Reciprocal, Exp, Neg, Log, Abs, the trigonometric and hyperbolic functions and their
// inverses, the exponential activations (Elu, Selu, Celu, Softplus, Mish), Softsign,
// ThresholdedRelu, and Pow with a constant scalar exponent.
#pragma once

#include <cstdint>

namespace memlane::cpu {

enum class MathFn : uint8_t {
  kSqrt, kReciprocal, kExp, kNeg, kLog, kAbs,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kElu, kSelu, kCelu, kSoftplus, kSoftsign, kMish, kThresholdedRelu,
};

// The ONNX attributes of the parameterised ones: alpha (Elu, Selu, Celu, ThresholdedRelu) and
// gamma (Selu); ignored by the others.
struct MathParams {
  float alpha = 1.f;
  float gamma = 1.f;
};

// y[i] = f(x[i]) for n floats; x may equal y.
void math_apply(MathFn f, const float* x, float* y, int64_t n, const MathParams& p = {});

// y[i] = x[i]^e (std::pow semantics) with exact fast paths for e = 1, 2, 3, 0.5, -1.
void pow_scalar(const float* x, float* y, int64_t n, float e);

}  // namespace memlane::cpu
