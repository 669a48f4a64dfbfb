// Clip, HardSigmoid, HardSwish and SiLU, elementwise (the CPU's cpu/clip_hard.cc).
#include "common.cuh"

namespace memlane::cuda {
namespace {
__device__ __forceinline__ float apply(ClipHardKind k, float v, float a, float b) {
  switch (k) {
    case ClipHardKind::kClip: return fminf(fmaxf(v, a), b);
    case ClipHardKind::kHardSigmoid: return fminf(fmaxf(a * v + b, 0.f), 1.f);
    case ClipHardKind::kHardSwish: return v * fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    case ClipHardKind::kSiLU: return v / (1.f + expf(-v));
  }
  return v;
}
template <typename T>
__global__ void k_clip_hard(ClipHardKind k, float a, float b, const T* x, T* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = from_f<T>(apply(k, to_f(x[i]), a, b));
}
}  // namespace

cudaError_t clip_hard(ClipHardKind k, float a, float b, Prec p, const void* x, void* y, int64_t n,
                      cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_clip_hard<T><<<blocks_for(n), kThreads, 0, s>>>(k, a, b, static_cast<const T*>(x),
                                                       static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
