// Where, Expand (broadcasting moves of any element size), Cast between storage types, Not,
// and the generators Range / ConstantOfShape (cpu/elementwise.cc, cpu/slice.cc).
#include <cuda_fp16.h>

#include "../data_kernels.h"
#include "common.cuh"

namespace memlane::cuda {
namespace {

__device__ __forceinline__ void offsets(const DataBroadcast& d, int inputs, int64_t i, int64_t* off) {
  for (int j = 0; j < inputs; ++j) off[j] = 0;
  for (int r = d.rank - 1; r >= 0; --r) {
    const int64_t c = i % d.out_dims[r];
    i /= d.out_dims[r];
    for (int j = 0; j < inputs; ++j) off[j] += c * d.strides[j][r];
  }
}

template <typename W>
__global__ void k_where(const uint8_t* cond, const W* x, const W* z, W* y, DataBroadcast d, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t off[3];
    offsets(d, 3, i, off);
    y[i] = cond[off[0]] ? x[off[1]] : z[off[2]];
  }
}

template <typename W>
__global__ void k_expand(const W* x, W* y, DataBroadcast d, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t off[1];
    offsets(d, 1, i, off);
    y[i] = x[off[0]];
  }
}

int64_t count(const DataBroadcast& d) {
  int64_t n = 1;
  for (int r = 0; r < d.rank; ++r) n *= d.out_dims[r];
  return n;
}

// Values pass through double (exact for int32 and float, and for int64 up to 2^53) except
// int64 -> int64 paths, which never reach here (a Cast to the same type copies).
template <typename S> __device__ __forceinline__ double to_d(S v) { return double(v); }
template <> __device__ __forceinline__ double to_d<__half>(__half v) { return double(__half2float(v)); }
template <typename S> __device__ __forceinline__ S from_d(double v) { return S(v); }
template <> __device__ __forceinline__ __half from_d<__half>(double v) { return half_sat(float(v)); }
template <> __device__ __forceinline__ uint8_t from_d<uint8_t>(double v) { return v != 0.0 ? 1 : 0; }

template <typename From, typename To>
__global__ void k_cast(const From* x, To* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    if constexpr (std::is_same<To, uint8_t>::value) y[i] = to_d(x[i]) != 0.0 ? 1 : 0;
    else if constexpr (std::is_integral<From>::value && std::is_integral<To>::value) y[i] = To(x[i]);
    else if constexpr (std::is_same<From, __half>::value) y[i] = from_d<To>(double(__half2float(x[i])));
    else if constexpr (std::is_same<To, __half>::value) y[i] = half_sat(float(x[i]));
    else y[i] = To(x[i]);
  }
}

template <typename From>
cudaError_t cast_from(Elem to, const void* x, void* y, int64_t n, cudaStream_t s) {
  const From* X = static_cast<const From*>(x);
  const unsigned g = blocks_for(n);
  switch (to) {
    case Elem::kF32: k_cast<From, float><<<g, kThreads, 0, s>>>(X, static_cast<float*>(y), n); break;
    case Elem::kF16: k_cast<From, __half><<<g, kThreads, 0, s>>>(X, static_cast<__half*>(y), n); break;
    case Elem::kI64: k_cast<From, int64_t><<<g, kThreads, 0, s>>>(X, static_cast<int64_t*>(y), n); break;
    case Elem::kI32: k_cast<From, int32_t><<<g, kThreads, 0, s>>>(X, static_cast<int32_t*>(y), n); break;
    default: k_cast<From, uint8_t><<<g, kThreads, 0, s>>>(X, static_cast<uint8_t*>(y), n); break;
  }
  return cudaGetLastError();
}

__global__ void k_not(const uint8_t* x, uint8_t* y, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = x[i] ? 0 : 1;
}

template <typename S>
__global__ void k_fill(S* y, bool range, double value, double start, double delta, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = from_d<S>(range ? start + double(i) * delta : value);
}

}  // namespace

cudaError_t where(int esize, const void* cond, const void* x, const void* z, void* y, const DataBroadcast& d,
                  cudaStream_t s) {
  const int64_t n = count(d);
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto tag) {
    using W = decltype(tag);
    k_where<W><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(cond), static_cast<const W*>(x),
                                                  static_cast<const W*>(z), static_cast<W*>(y), d, n);
    return cudaGetLastError();
  });
}

cudaError_t expand(int esize, const void* x, void* y, const DataBroadcast& d, cudaStream_t s) {
  const int64_t n = count(d);
  if (n <= 0) return cudaSuccess;
  return dispatch_size(esize, [&](auto tag) {
    using W = decltype(tag);
    k_expand<W><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const W*>(x), static_cast<W*>(y), d, n);
    return cudaGetLastError();
  });
}

cudaError_t cast(Elem from, Elem to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  if (from == to) return cudaMemcpyAsync(y, x, size_t(n) * size_t(elem_bytes(from)), cudaMemcpyDeviceToDevice, s);
  switch (from) {
    case Elem::kF32: return cast_from<float>(to, x, y, n, s);
    case Elem::kF16: return cast_from<__half>(to, x, y, n, s);
    case Elem::kI64: return cast_from<int64_t>(to, x, y, n, s);
    case Elem::kI32: return cast_from<int32_t>(to, x, y, n, s);
    default: return cast_from<uint8_t>(to, x, y, n, s);
  }
}

cudaError_t logical_not(const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  k_not<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n);
  return cudaGetLastError();
}

cudaError_t fill(Elem t, bool range, double value, double start, double delta, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const unsigned g = blocks_for(n);
  switch (t) {
    case Elem::kF32: k_fill<float><<<g, kThreads, 0, s>>>(static_cast<float*>(y), range, value, start, delta, n); break;
    case Elem::kF16: k_fill<__half><<<g, kThreads, 0, s>>>(static_cast<__half*>(y), range, value, start, delta, n); break;
    case Elem::kI64: k_fill<int64_t><<<g, kThreads, 0, s>>>(static_cast<int64_t*>(y), range, value, start, delta, n); break;
    case Elem::kI32: k_fill<int32_t><<<g, kThreads, 0, s>>>(static_cast<int32_t*>(y), range, value, start, delta, n); break;
    default: k_fill<uint8_t><<<g, kThreads, 0, s>>>(static_cast<uint8_t*>(y), range, value, start, delta, n); break;
  }
  return cudaGetLastError();
}

}  // namespace memlane::cuda
