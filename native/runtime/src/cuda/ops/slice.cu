// Slice with constant starts and steps (negative steps too; the validator keeps every read
// inside the input), any element size: each output element reads its input element.
#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename W>
__global__ void k_slice(const W* x, W* y, SliceDesc d, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t rem = i, src = 0;
    for (int r = d.rank - 1; r >= 0; --r) {
      src += (d.start[r] + (rem % d.out_dims[r]) * d.step[r]) * d.in_stride[r];
      rem /= d.out_dims[r];
    }
    y[i] = x[src];
  }
}
}  // namespace

cudaError_t slice(int esize, const void* x, void* y, const SliceDesc& d, cudaStream_t s) {
  int64_t n = 1;
  for (int r = 0; r < d.rank; ++r) n *= d.out_dims[r];
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto tag) {
    using W = decltype(tag);
    k_slice<W><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(x), static_cast<W*>(y), d, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
