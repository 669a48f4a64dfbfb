// Two-input element-wise ops of plan v2 with numpy broadcasting, on every storage type: the
// arithmetic of cpu/binary.cc (integer Div/Mod never trap) and comparisons / And / Or to bool.
#include <cuda_fp16.h>

#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {

// Storage type S, compute type C (half computes in float).
template <typename S> struct Compute { using type = S; };
template <> struct Compute<__half> { using type = float; };
template <typename S> __device__ __forceinline__ typename Compute<S>::type load(const S* p, int64_t i) { return p[i]; }
template <> __device__ __forceinline__ float load<__half>(const __half* p, int64_t i) { return __half2float(p[i]); }
template <typename S> __device__ __forceinline__ void store(S* p, int64_t i, typename Compute<S>::type v) { p[i] = v; }
template <> __device__ __forceinline__ void store<__half>(__half* p, int64_t i, float v) { p[i] = half_sat(v); }

template <typename T> __device__ __forceinline__ T div_of(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) return a / b;
  else return b == 0 ? T(0) : b == T(-1) ? T(T(0) - a) : T(a / b);
}
template <typename T> __device__ __forceinline__ T mod_of(T a, T b, bool fmod_sign) {
  if constexpr (std::is_floating_point<T>::value) return fmodf(a, b);
  else {
    if (b == 0 || b == T(-1)) return T(0);
    const T r = a % b;
    return !fmod_sign && r != 0 && ((r < 0) != (b < 0)) ? T(r + b) : r;  // fmod 0: the divisor's sign
  }
}

// The element of each operand that output element i reads (broadcast strides are 0).
__device__ inline void operand_offsets(const DataBroadcast& d, int64_t i, int64_t* ia, int64_t* ib) {
  int64_t rem = i;
  *ia = 0;
  *ib = 0;
  for (int r = d.rank - 1; r >= 0; --r) {
    const int64_t c = rem % d.out_dims[r];
    rem /= d.out_dims[r];
    *ia += c * d.strides[0][r];
    *ib += c * d.strides[1][r];
  }
}

template <typename S>
__global__ void k_arith(DataBinaryKind k, const S* a, const S* b, S* y, DataBroadcast d, int64_t n) {
  using C = typename Compute<S>::type;
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t ia, ib;
    operand_offsets(d, i, &ia, &ib);
    const C va = load(a, ia), vb = load(b, ib);
    C v;
    switch (k) {
      case DataBinaryKind::kAdd: v = C(va + vb); break;
      case DataBinaryKind::kSub: v = C(va - vb); break;
      case DataBinaryKind::kMul: v = C(va * vb); break;
      case DataBinaryKind::kDiv: v = div_of(va, vb); break;
      case DataBinaryKind::kMod: v = mod_of(va, vb, false); break;
      case DataBinaryKind::kFmod: v = mod_of(va, vb, true); break;
      // ONNX Max/Min propagate a NaN operand.
      case DataBinaryKind::kMax: v = va != va ? va : vb != vb ? vb : va < vb ? vb : va; break;
      case DataBinaryKind::kPRelu: v = va < C(0) ? C(va * vb) : va; break;
      default: v = va != va ? va : vb != vb ? vb : vb < va ? vb : va; break;
    }
    store(y, i, v);
  }
}

template <typename S>
__global__ void k_predicate(DataBinaryKind k, const S* a, const S* b, uint8_t* y, DataBroadcast d, int64_t n) {
  using C = typename Compute<S>::type;
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t ia, ib;
    operand_offsets(d, i, &ia, &ib);
    const C va = load(a, ia), vb = load(b, ib);
    bool v;
    switch (k) {
      case DataBinaryKind::kEqual: v = va == vb; break;
      case DataBinaryKind::kLess: v = va < vb; break;
      case DataBinaryKind::kGreater: v = va > vb; break;
      case DataBinaryKind::kLessOrEqual: v = va <= vb; break;
      case DataBinaryKind::kGreaterOrEqual: v = va >= vb; break;
      case DataBinaryKind::kAnd: v = va && vb; break;
      default: v = va || vb; break;
    }
    y[i] = v ? 1 : 0;
  }
}

template <typename S>
cudaError_t launch(DataBinaryKind k, const void* a, const void* b, void* y, const DataBroadcast& d, int64_t n,
                   cudaStream_t s) {
  if (k >= DataBinaryKind::kEqual) {
    k_predicate<S><<<blocks_for(n), kThreads, 0, s>>>(k, static_cast<const S*>(a), static_cast<const S*>(b),
                                                      static_cast<uint8_t*>(y), d, n);
    return cudaGetLastError();
  }
  if constexpr (std::is_same<S, uint8_t>::value) {
    return cudaErrorInvalidValue;  // no bool arithmetic (refused at prepare)
  } else {
    k_arith<S><<<blocks_for(n), kThreads, 0, s>>>(k, static_cast<const S*>(a), static_cast<const S*>(b),
                                                  static_cast<S*>(y), d, n);
    return cudaGetLastError();
  }
}

}  // namespace

cudaError_t data_binary(DataBinaryKind k, Elem in, const void* a, const void* b, void* y, const DataBroadcast& d,
                        cudaStream_t s) {
  int64_t n = 1;
  for (int r = 0; r < d.rank; ++r) n *= d.out_dims[r];
  if (n <= 0) return cudaSuccess;
  switch (in) {
    case Elem::kF32: return launch<float>(k, a, b, y, d, n, s);
    case Elem::kF16: return launch<__half>(k, a, b, y, d, n, s);
    case Elem::kI64: return launch<int64_t>(k, a, b, y, d, n, s);
    case Elem::kI32: return launch<int32_t>(k, a, b, y, d, n, s);
    default: return launch<uint8_t>(k, a, b, y, d, n, s);
  }
}

}  // namespace memlane::cuda
