// fp32 <-> fp16 conversion: weight upload in fp16 mode, inputs in and outputs out.
// float -> half saturates to +-65504 (common.cuh half_sat).
#include "common.cuh"

namespace memlane::cuda {
namespace {
__global__ void k_f32_to_f16(const float* x, __half* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = half_sat(x[i]);  // saturating (common.cuh)
}
__global__ void k_f16_to_f32(const __half* x, float* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = __half2float(x[i]);
}
}  // namespace

cudaError_t cast_f32_to_f16(const float* x, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  k_f32_to_f16<<<blocks_for(n), kThreads, 0, s>>>(x, static_cast<__half*>(y), n);
  return cudaGetLastError();
}
cudaError_t cast_f16_to_f32(const void* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  k_f16_to_f32<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const __half*>(x), y, n);
  return cudaGetLastError();
}

}  // namespace memlane::cuda
