// Gather along one axis and GatherND (batch_dims 0) on run-time indices, any element size.
// An index out of range never reads outside the data: its row is zeros and *err records the
// op (first one wins) for the execution context to report after the request (cpu: KernelError).
#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {

// One thread per output element: y [outer, nidx, inner].
template <typename W, typename I>
__global__ void k_gather(const W* data, const I* idx, W* y, GatherDesc d, int* err, int tag, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    const int64_t c = i % d.inner, row = i / d.inner, j = row % d.nidx, o = row / d.nidx;
    int64_t k = int64_t(idx[j]);
    if (k < 0) k += d.len;  // negative indices count from the end (ONNX)
    if (k < 0 || k >= d.len) {
      if (c == 0) flag_index_error(err, tag);
      y[i] = W(0);
      continue;
    }
    y[i] = data[(o * d.len + k) * d.inner + c];
  }
}

template <typename W, typename I>
__global__ void k_gather_nd(const W* data, const I* idx, W* y, GatherNDDesc d, int* err, int tag, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    const int64_t c = i % d.slice, t = i / d.slice;
    int64_t off = 0;
    bool ok = true;
    for (int j = 0; j < d.r; ++j) {
      int64_t k = int64_t(idx[t * d.r + j]);
      if (k < 0) k += d.dims[j];
      ok = ok && k >= 0 && k < d.dims[j];
      off += k * d.stride[j];
    }
    if (!ok) {
      if (c == 0) flag_index_error(err, tag);
      y[i] = W(0);
      continue;
    }
    y[i] = data[off + c];
  }
}

}  // namespace

cudaError_t gather(int esize, bool idx64, const void* data, const void* idx, void* y, const GatherDesc& d, int* err,
                   int tag, cudaStream_t s) {
  const int64_t n = d.outer * d.nidx * d.inner;
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto wt) {
    using W = decltype(wt);
    return by_index(idx64, [&](auto it) {
      using I = decltype(it);
      k_gather<W, I><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(data), static_cast<const I*>(idx),
                                                        static_cast<W*>(y), d, err, tag, n);
      return cudaGetLastError();
    });
  });
}

cudaError_t gather_nd(int esize, bool idx64, const void* data, const void* idx, void* y, const GatherNDDesc& d, int* err,
                      int tag, cudaStream_t s) {
  const int64_t n = d.tuples * d.slice;
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto wt) {
    using W = decltype(wt);
    return by_index(idx64, [&](auto it) {
      using I = decltype(it);
      k_gather_nd<W, I><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(data), static_cast<const I*>(idx),
                                                           static_cast<W*>(y), d, err, tag, n);
      return cudaGetLastError();
    });
  });
}

}  // namespace memlane::cuda
