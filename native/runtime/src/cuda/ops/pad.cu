// Pad (constant, reflect, edge) over up to kMaxRank dims: each output element finds its
// source, as cpu/pad.cc does; negative pads crop.
#include "common.cuh"

namespace memlane::cuda {
namespace {
struct PadGeom {
  int rank;
  int mode;
  float value;
  int64_t out_dims[kMaxRank], in_dims[kMaxRank], in_strides[kMaxRank], begin[kMaxRank];
};
__device__ __forceinline__ int64_t source(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  if (mode == 0) return -1;
  if (mode == 2 || n == 1) return i < 0 ? 0 : n - 1;
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}
template <typename T>
__global__ void k_pad(const T* x, T* y, PadGeom g, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (int r = g.rank - 1; r >= 0; --r) {
      const int64_t s = source(rem % g.out_dims[r] - g.begin[r], g.in_dims[r], g.mode);
      rem /= g.out_dims[r];
      if (s < 0) inside = false;
      src += s * g.in_strides[r];
    }
    y[i] = inside ? x[src] : from_f<T>(g.value);
  }
}
}  // namespace

cudaError_t pad(Prec p, const void* x, void* y, int rank, const int64_t* in_dims, const int64_t* pads,
                int mode, float value, cudaStream_t s) {
  if (rank < 1 || rank > kMaxRank) return cudaErrorInvalidValue;
  PadGeom g{};
  g.rank = rank;
  g.mode = mode;
  g.value = value;
  int64_t st = 1, n = 1;
  for (int r = rank - 1; r >= 0; --r) {
    g.in_dims[r] = in_dims[r];
    g.in_strides[r] = st;
    st *= in_dims[r];
    g.begin[r] = pads[r];
    g.out_dims[r] = in_dims[r] + pads[r] + pads[rank + r];
    n *= g.out_dims[r];
  }
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_pad<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), g, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
