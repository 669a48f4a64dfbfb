// Elementwise float math on activations (plain functions over raw pointers): Sqrt,
// Reciprocal, Exp, Neg, Log, Abs, Sin, Cos, and Pow with a constant scalar exponent.
#pragma once

#include <cstdint>

namespace memlane::cpu {

enum class MathFn : uint8_t { kSqrt, kReciprocal, kExp, kNeg, kLog, kAbs, kSin, kCos };

// y[i] = f(x[i]) for n floats; x may equal y.
void math_apply(MathFn f, const float* x, float* y, int64_t n);

// y[i] = x[i]^e (std::pow semantics) with exact fast paths for e = 1, 2, 3, 0.5, -1.
void pow_scalar(const float* x, float* y, int64_t n, float e);

}  // namespace memlane::cpu
