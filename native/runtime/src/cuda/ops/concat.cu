// Concat: each input is copied into its column range of the output, per outer row.
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

cudaError_t concat_part(Prec p, const void* x, void* y, int64_t outer, int64_t xdim,
                        int64_t ydim, int64_t at, int64_t inner, cudaStream_t s) {
  int64_t n = outer * xdim * inner;
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_concat<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                    xdim * inner, ydim * inner, at * inner, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
