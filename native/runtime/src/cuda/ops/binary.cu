// Add, Sub, Mul, Div with numpy broadcasting (strides of 0 on broadcast dimensions).
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_binary(BinaryKind k, const T* a, const T* b, T* y, BroadcastDesc d,
                         int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int r = d.rank - 1; r >= 0; --r) {
      int64_t c = rem % d.out_dims[r];
      rem /= d.out_dims[r];
      ia += c * d.a_strides[r];
      ib += c * d.b_strides[r];
    }
    float va = to_f(a[ia]), vb = to_f(b[ib]), v;
    switch (k) {
      case BinaryKind::kAdd: v = va + vb; break;
      case BinaryKind::kSub: v = va - vb; break;
      case BinaryKind::kMul: v = va * vb; break;
      default: v = va / vb; break;
    }
    y[i] = from_f<T>(v);
  }
}
}  // namespace

cudaError_t binary(BinaryKind k, Prec p, const void* a, const void* b, void* y,
                   const BroadcastDesc& d, cudaStream_t s) {
  int64_t n = 1;
  for (int r = 0; r < d.rank; ++r) n *= d.out_dims[r];
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_binary<T><<<blocks_for(n), kThreads, 0, s>>>(k, static_cast<const T*>(a),
                                                    static_cast<const T*>(b), static_cast<T*>(y),
                                                    d, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
