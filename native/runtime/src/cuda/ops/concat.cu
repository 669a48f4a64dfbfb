// Concat: each input is copied into its column range of the output, per outer row.
#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_concat(const T* x, T* y, int64_t xrow, int64_t yrow, int64_t off, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t o = i / xrow, c = i % xrow;
    y[o * yrow + off + c] = x[i];
  }
}
}  // namespace

// Elements of any size (float in its precision, int64, bool) as unsigned words of that size.
cudaError_t concat_part_bytes(int esize, const void* x, void* y, int64_t outer, int64_t xdim, int64_t ydim, int64_t at,
                              int64_t inner, cudaStream_t s) {
  const int64_t n = outer * xdim * inner;
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto tag) {
    using W = decltype(tag);
    k_concat<W><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(x), static_cast<W*>(y), xdim * inner,
                                                   ydim * inner, at * inner, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
