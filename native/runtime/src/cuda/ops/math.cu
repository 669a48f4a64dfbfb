// Elementwise float math on activations: Pow (constant exponent, exact fast paths for 2, 3
// and 0.5), Sqrt, Reciprocal, Exp, Neg, Log, Abs, Sin, Cos.
#include "common.cuh"

namespace memlane::cuda {
namespace {
__device__ __forceinline__ float apply(MathKind k, float v, float e) {
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
  }
  return v;
}
template <typename T>
__global__ void k_math(MathKind k, float e, const T* x, T* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = from_f<T>(apply(k, to_f(x[i]), e));
}
}  // namespace

cudaError_t math(MathKind k, float exponent, Prec p, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_math<T><<<blocks_for(n), kThreads, 0, s>>>(k, exponent, static_cast<const T*>(x), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
