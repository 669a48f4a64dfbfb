// CumSum along one axis (cpu/cumsum.cc): one thread per column of x [outer, len, inner], summing
// down len in order, so fp32 results are the CPU backend's bit for bit. Half storage is summed
// in float (rounded once per stored element); integers are added as unsigned words, which wrap
// as two's complement where a signed overflow would be undefined.
#include <cuda_fp16.h>

#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {

// Storage S, accumulator A.
template <typename S> struct Acc { using type = S; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<int64_t> { using type = uint64_t; };
template <> struct Acc<int32_t> { using type = uint32_t; };
template <typename S, typename A> __device__ __forceinline__ A load(const S* p, int64_t i) { return A(p[i]); }
template <> __device__ __forceinline__ float load<__half, float>(const __half* p, int64_t i) { return __half2float(p[i]); }
template <typename S, typename A> __device__ __forceinline__ void store(S* p, int64_t i, A v) { p[i] = S(v); }
template <> __device__ __forceinline__ void store<__half, float>(__half* p, int64_t i, float v) { p[i] = half_sat(v); }

template <typename S>
__global__ void k_cumsum(const S* x, S* y, CumSumDesc d, int64_t columns) {
  using A = typename Acc<S>::type;
  MEMLANE_GRID_STRIDE(col, columns) {
    const int64_t o = col / d.inner, c = col % d.inner;
    const int64_t base = o * d.len * d.inner + c;
    A sum = A(0);
    for (int64_t s = 0; s < d.len; ++s) {
      const int64_t at = base + (d.reverse ? d.len - 1 - s : s) * d.inner;
      const A v = load<S, A>(x, at);
      if (!d.exclusive) sum = A(sum + v);
      store<S, A>(y, at, sum);
      if (d.exclusive) sum = A(sum + v);
    }
  }
}

template <typename S>
cudaError_t launch(const void* x, void* y, const CumSumDesc& d, int64_t columns, cudaStream_t s) {
  k_cumsum<S><<<blocks_for(columns), kThreads, 0, s>>>(static_cast<const S*>(x), static_cast<S*>(y), d, columns);
  return cudaGetLastError();
}

}  // namespace

cudaError_t cumsum(Elem t, const void* x, void* y, const CumSumDesc& d, cudaStream_t s) {
  const int64_t columns = d.outer * d.inner;
  if (columns <= 0 || d.len <= 0) return cudaSuccess;
  switch (t) {
    case Elem::kF32: return launch<float>(x, y, d, columns, s);
    case Elem::kF16: return launch<__half>(x, y, d, columns, s);
    case Elem::kI64: return launch<int64_t>(x, y, d, columns, s);
    case Elem::kI32: return launch<int32_t>(x, y, d, columns, s);
    default: return cudaErrorInvalidValue;  // no bool sums (refused at prepare)
  }
}

}  // namespace memlane::cuda
