// Elementwise float math on activations: Pow (constant exponent, exact fast paths for 2, 3
// and 0.5), Sqrt, Reciprocal, Exp, Neg, Log, Abs, trigonometry and its inverses, the Elu
// family, Softplus, Softsign, Mish, ThresholdedRelu (the formulas of cpu/elementwise_math.cc).
#include "common.cuh"

namespace memlane::cuda {
namespace {
__device__ __forceinline__ float softplus(float v) { return fmaxf(v, 0.f) + log1pf(expf(-fabsf(v))); }
__device__ __forceinline__ float elu(float v, float alpha) { return v > 0.f ? v : alpha * expm1f(v); }

__device__ __forceinline__ float apply(MathKind k, float v, MathArgs m) {
  const float e = m.a;
  switch (k) {
    case MathKind::kPow:
      if (e == 2.f) return v * v;
      if (e == 3.f) return v * v * v;
      if (e == 0.5f) return sqrtf(v);
      return powf(v, e);
    case MathKind::kSqrt: return sqrtf(v);
    case MathKind::kReciprocal: return 1.f / v;
    case MathKind::kExp: return expf(v);
    case MathKind::kNeg: return -v;
    case MathKind::kLog: return logf(v);
    case MathKind::kAbs: return fabsf(v);
    case MathKind::kSin: return sinf(v);
    case MathKind::kCos: return cosf(v);
    case MathKind::kTan: return tanf(v);
    case MathKind::kAsin: return asinf(v);
    case MathKind::kAcos: return acosf(v);
    case MathKind::kAtan: return atanf(v);
    case MathKind::kSinh: return sinhf(v);
    case MathKind::kCosh: return coshf(v);
    case MathKind::kAsinh: return asinhf(v);
    case MathKind::kAcosh: return acoshf(v);
    case MathKind::kAtanh: return atanhf(v);
    case MathKind::kElu: return elu(v, m.a);
    case MathKind::kSelu: return m.b * elu(v, m.a);
    case MathKind::kCelu: return m.a * elu(v / m.a, 1.f);
    case MathKind::kSoftplus: return softplus(v);
    case MathKind::kSoftsign: return v / (1.f + fabsf(v));
    case MathKind::kMish: return v * tanhf(softplus(v));
    case MathKind::kThresholdedRelu: return v > m.a ? v : 0.f;
  }
  return v;
}
template <typename T>
__global__ void k_math(MathKind k, MathArgs m, const T* x, T* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = from_f<T>(apply(k, to_f(x[i]), m));
}
}  // namespace

cudaError_t math(MathKind k, MathArgs m, Prec p, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_math<T><<<blocks_for(n), kThreads, 0, s>>>(k, m, static_cast<const T*>(x), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
