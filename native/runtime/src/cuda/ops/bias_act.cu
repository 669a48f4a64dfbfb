// The epilogue of Conv and Gemm: per-channel bias and optional ReLU, in place.
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_bias_act(T* y, const T* bias, int64_t channels, int64_t inner, bool relu,
                           int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    float v = to_f(y[i]);
    if (bias) v += to_f(bias[(i / inner) % channels]);
    if (relu && v < 0.f) v = 0.f;
    y[i] = from_f<T>(v);
  }
}
}  // namespace

cudaError_t bias_activation(Prec p, void* y, const void* bias, int64_t outer, int64_t channels,
                            int64_t inner, bool relu, cudaStream_t s) {
  if (!bias && !relu) return cudaSuccess;
  int64_t n = outer * channels * inner;
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_bias_act<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(y),
                                                      static_cast<const T*>(bias), channels,
                                                      inner, relu, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
