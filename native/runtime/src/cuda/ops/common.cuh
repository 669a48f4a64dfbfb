// Shared by the op kernels: float <-> storage conversion and launch geometry.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.h"

namespace memlane::cuda {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
// float -> fp16 saturates at the largest finite half (65504) instead of rounding to
// infinity: a -FLT_MAX attention mask (cpu: finite) must stay finite, or a fully masked
// row becomes 0 * inf = NaN where the CPU gives a uniform row. NaN stays NaN (the
// comparisons are false for it).
__device__ __forceinline__ __half half_sat(float v) {
  constexpr float kHalfMax = 65504.f;
  return __float2half_rn(v > kHalfMax ? kHalfMax : v < -kHalfMax ? -kHalfMax : v);
}
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return half_sat(v); }

inline constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535LL * 32 ? 65535LL * 32 : b);  // grid-stride beyond
}

#define MEMLANE_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// Calls F.template operator()<T>() with T = float or __half.
template <typename F>
cudaError_t dispatch(Prec p, F&& f) {
  if (p == Prec::kF32) return f(float{});
  return f(__half{});
}

}  // namespace memlane::cuda

namespace memlane::cuda {
// Calls f(I{}) with the indices' type: int64 (idx64) or int32.
template <typename F>
cudaError_t by_index(bool idx64, F&& f) {
  return idx64 ? f(int64_t{}) : f(int32_t{});
}

// An index out of range: records the op's `tag` in *err, the first one wins (data_kernels.h).
__device__ __forceinline__ void flag_index_error(int* err, int tag) {
  if (err) atomicCAS(err, 0, tag);
}

// Calls f(W{}) with an unsigned word of `esize` bytes (element moves of any dtype).
template <typename F>
cudaError_t dispatch_size(int esize, F&& f) {
  switch (esize) {
    case 8: return f(uint64_t{});
    case 4: return f(uint32_t{});
    case 2: return f(uint16_t{});
    case 1: return f(uint8_t{});
    default: return cudaErrorInvalidValue;
  }
}
}  // namespace memlane::cuda
