// Transpose of up to kMaxRank dimensions: each output element gathers its input element.
#include "common.cuh"

namespace memlane::cuda {
namespace {
struct TransposeDesc {
  int rank;
  int64_t out_dims[kMaxRank];
  int64_t in_strides_by_out[kMaxRank];  // input stride of output dimension r
};
template <typename T>
__global__ void k_transpose(const T* x, T* y, TransposeDesc d, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t rem = i, src = 0;
    for (int r = d.rank - 1; r >= 0; --r) {
      src += (rem % d.out_dims[r]) * d.in_strides_by_out[r];
      rem /= d.out_dims[r];
    }
    y[i] = x[src];
  }
}
}  // namespace

cudaError_t transpose(Prec p, const void* x, void* y, int rank, const int64_t* in_dims,
                      const int* perm, cudaStream_t s) {
  if (rank < 1 || rank > kMaxRank) return cudaErrorInvalidValue;
  TransposeDesc d{};
  d.rank = rank;
  int64_t in_strides[kMaxRank];
  int64_t st = 1;
  for (int r = rank - 1; r >= 0; --r) {
    in_strides[r] = st;
    st *= in_dims[r];
  }
  int64_t n = 1;
  for (int r = 0; r < rank; ++r) {
    d.out_dims[r] = in_dims[perm[r]];
    d.in_strides_by_out[r] = in_strides[perm[r]];
    n *= d.out_dims[r];
  }
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_transpose<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                       d, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
