// Split: one output's column range of x [outer, xdim * inner] per call (Concat's inverse),
// and Concat's [1, ...] weight inputs, repeated for every sample.
#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_split(const T* x, T* y, int64_t xrow, int64_t yrow, int64_t off, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    const int64_t o = i / yrow, c = i % yrow;
    y[i] = x[o * xrow + off + c];
  }
}
template <typename T>
__global__ void k_concat_repeat(const T* w, T* y, int64_t wrow, int64_t yrow, int64_t off,
                                int64_t rows_per_sample, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    const int64_t o = i / wrow, c = i % wrow;
    y[o * yrow + off + c] = w[(o % rows_per_sample) * wrow + c];
  }
}
}  // namespace

cudaError_t split_part(Prec p, const void* x, void* y, int64_t outer, int64_t xdim, int64_t ydim,
                       int64_t at, int64_t inner, cudaStream_t s) {
  const int64_t n = outer * ydim * inner;
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_split<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                   xdim * inner, ydim * inner, at * inner, n);
    return cudaGetLastError();
  });
}

cudaError_t concat_repeat_part_bytes(int esize, const void* w, void* y, int64_t outer, int64_t rows_per_sample,
                                     int64_t wdim, int64_t ydim, int64_t at, int64_t inner, cudaStream_t s) {
  const int64_t n = outer * wdim * inner;
  if (n <= 0 || rows_per_sample <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto tag) {
    using W = decltype(tag);
    k_concat_repeat<W><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(w), static_cast<W*>(y), wdim * inner,
                                                           ydim * inner, at * inner, rows_per_sample, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
