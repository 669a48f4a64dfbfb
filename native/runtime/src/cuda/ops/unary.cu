// Relu, LeakyRelu, Sigmoid, Tanh, Erf, Gelu (erf and tanh forms), elementwise.
#include "common.cuh"

namespace memlane::cuda {
namespace {
__device__ __forceinline__ float apply(UnaryKind k, float v, float alpha) {
  switch (k) {
    case UnaryKind::kRelu: return v > 0.f ? v : 0.f;
    case UnaryKind::kLeakyRelu: return v >= 0.f ? v : alpha * v;
    case UnaryKind::kSigmoid: return 1.f / (1.f + expf(-v));
    case UnaryKind::kTanh: return tanhf(v);
    case UnaryKind::kErf: return erff(v);
    case UnaryKind::kGelu: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case UnaryKind::kGeluTanh:
      return 0.5f * v * (1.f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  return v;
}
template <typename T>
__global__ void k_unary(UnaryKind k, float alpha, const T* x, T* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = from_f<T>(apply(k, to_f(x[i]), alpha));
}
}  // namespace

cudaError_t unary(UnaryKind k, float alpha, Prec p, const void* x, void* y, int64_t n,
                  cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_unary<T><<<blocks_for(n), kThreads, 0, s>>>(k, alpha, static_cast<const T*>(x),
                                                   static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
