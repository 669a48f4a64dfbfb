// LayerNormalization: one block per row; the mean, then the variance of the deviations
// (two passes over the row, as the CPU backend computes it), block-reduced through warp
// shuffles and shared memory.
#include "common.cuh"

namespace memlane::cuda {
namespace {

constexpr int kLnThreads = 256;

__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float t = 0.f;
  if (threadIdx.x < blockDim.x / 32) t = shared[threadIdx.x];
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  if (threadIdx.x == 0) shared[0] = t;
  __syncthreads();
  const float r = shared[0];
  __syncthreads();  // shared is reused by the next reduction
  return r;
}

template <typename T>
__global__ void k_layernorm(const T* x, T* y, const T* scale, const T* bias, int64_t rows, int64_t n, float eps) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += to_f(xr[i]);
    const float mean = block_sum(s, shared) / float(n);
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float d = to_f(xr[i]) - mean;
      q += d * d;
    }
    const float inv = rsqrtf(block_sum(q, shared) / float(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float v = (to_f(xr[i]) - mean) * inv * to_f(scale[i]);
      if (bias) v += to_f(bias[i]);
      yr[i] = from_f<T>(v);
    }
  }
}

}  // namespace

cudaError_t layernorm(Prec p, const void* x, void* y, const void* scale, const void* bias, int64_t rows,
                      int64_t n, float eps, cudaStream_t s) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows < 65535LL * 32 ? rows : 65535LL * 32);
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_layernorm<T><<<blocks, kLnThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                  static_cast<const T*>(scale), static_cast<const T*>(bias), rows,
                                                  n, eps);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
