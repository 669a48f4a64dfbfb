// GatherElements on run-time indices, any element size (cpu/gather_elements.cc). An index out
// of range never reads outside the data: its element is zero and *err records the op (first
// one wins) for the execution context to report after the request (cpu: KernelError).
#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {

// One thread per output element (the indices' dims).
template <typename W, typename I>
__global__ void k_gather_elements(const W* data, const I* idx, W* y, GatherElementsDesc d, int* err, int tag, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t rem = i, off = 0;
    for (int r = d.rank - 1; r >= 0; --r) {
      if (r != d.axis) off += (rem % d.out_dims[r]) * d.data_stride[r];
      rem /= d.out_dims[r];
    }
    int64_t k = int64_t(idx[i]);
    if (k < 0) k += d.len;  // negative indices count from the end (ONNX)
    if (k < 0 || k >= d.len) {
      flag_index_error(err, tag);
      y[i] = W(0);
      continue;
    }
    y[i] = data[off + k * d.data_stride[d.axis]];
  }
}

}  // namespace

cudaError_t gather_elements(int esize, bool idx64, const void* data, const void* idx, void* y, const GatherElementsDesc& d,
                            int* err, int tag, cudaStream_t s) {
  int64_t n = 1;
  for (int r = 0; r < d.rank; ++r) n *= d.out_dims[r];
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto wt) {
    using W = decltype(wt);
    return by_index(idx64, [&](auto it) {
      using I = decltype(it);
      k_gather_elements<W, I><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(data), static_cast<const I*>(idx),
                                                                 static_cast<W*>(y), d, err, tag, n);
      return cudaGetLastError();
    });
  });
}

}  // namespace memlane::cuda
