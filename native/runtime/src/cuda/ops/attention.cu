// Fused attention: one block per (slice, query row). The row's T scores live in shared
// memory; max and sum are block reductions; then each thread produces output columns. Never
// stores the [S, T] scores, which is the point of the fused op (src/compiler/fuse-attention.ts).
#include <cfloat>

#include "common.cuh"

namespace memlane::cuda {
namespace {

constexpr int kAttThreads = 128;

__device__ float block_reduce(float v, float* red, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = red[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w) t = is_max ? fmaxf(t, red[w]) : t + red[w];
    red[0] = t;
  }
  __syncthreads();
  const float r = red[0];
  __syncthreads();
  return r;
}

// The mask term, clamped at -FLT_MAX: a fully masked row stays finite and comes out uniform,
// as on the CPU (score + -FLT_MAX == -FLT_MAX there), not NaN. In half, -65504 is what any
// mask at or below it saturated to (common.cuh: -1e9, finfo.min, -inf), so it stands for
// -FLT_MAX: added as -65504 in float the row would give the softmax of the raw scores.
__device__ __forceinline__ float mask_term(float v) { return fmaxf(v, -FLT_MAX); }
__device__ __forceinline__ float mask_term(__half v) {
  const float f = __half2float(v);
  return f <= -65504.f ? -FLT_MAX : f;
}

template <typename T>
__global__ void k_attention(const T* q, const T* kt, const T* v, const T* mask, T* y, AttentionDesc d,
                            int64_t rows) {
  extern __shared__ float scores[];
  __shared__ float red[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t slice = row / d.S, i = row % d.S;
    const T* qr = q + (slice * d.S + i) * d.d;
    const T* k = kt + slice * d.d * d.T;
    const T* vv = v + slice * d.T * d.dv;
    const T* m = nullptr;
    if (mask) {
      int64_t rem = slice, off = 0;
      for (int l = d.lead - 1; l >= 0; --l) {
        off += (rem % d.dims[l]) * d.mask_stride[l];
        rem /= d.dims[l];
      }
      m = mask + off + i * d.mask_row;
    }
    float mx = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < d.T; j += blockDim.x) {
      float acc = 0.f;
      for (int64_t c = 0; c < d.d; ++c) acc += to_f(qr[c]) * to_f(k[c * d.T + j]);
      acc *= d.scale;
      if (m) acc += mask_term(m[j * d.mask_col]);
      scores[j] = acc;
      mx = fmaxf(mx, acc);
    }
    mx = block_reduce(mx, red, true);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < d.T; j += blockDim.x) {
      const float e = expf(scores[j] - mx);
      scores[j] = e;
      sum += e;
    }
    const float inv = 1.f / block_reduce(sum, red, false);  // (its barriers publish scores too)
    T* yr = y + (slice * d.S + i) * d.dv;
    for (int64_t c = threadIdx.x; c < d.dv; c += blockDim.x) {
      float acc = 0.f;
      for (int64_t j = 0; j < d.T; ++j) acc += scores[j] * to_f(vv[j * d.dv + c]);
      yr[c] = from_f<T>(acc * inv);
    }
    __syncthreads();  // scores are rewritten by the next row
  }
}

}  // namespace

cudaError_t attention(Prec p, const void* q, const void* kt, const void* v, const void* mask, void* y,
                      const AttentionDesc& d, cudaStream_t s) {
  if (d.T > kAttentionMaxT || d.T <= 0) return cudaErrorInvalidValue;
  int64_t rows = d.S;
  for (int i = 0; i < d.lead; ++i) rows *= d.dims[i];
  if (rows <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows < 65535LL * 32 ? rows : 65535LL * 32);
  const size_t shared = static_cast<size_t>(d.T) * sizeof(float);  // <= 32 KiB: no opt-in needed
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_attention<T><<<blocks, kAttThreads, shared, s>>>(static_cast<const T*>(q), static_cast<const T*>(kt),
                                                        static_cast<const T*>(v), static_cast<const T*>(mask),
                                                        static_cast<T*>(y), d, rows);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
