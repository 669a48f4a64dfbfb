// AveragePool2d and GlobalAveragePool. With countIncludePad the divisor counts padding
// but not the part of a ceil-mode window beyond the padded input (ONNX / PyTorch).
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_avgpool(const T* x, T* y, PoolDesc d, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t ow = i % d.OW, t = i / d.OW;
    int64_t oh = t % d.OH, nc = t / d.OH;
    int64_t h0 = oh * d.sh - d.pt, w0 = ow * d.sw - d.pl;
    int64_t h1 = h0 + d.kh, w1 = w0 + d.kw;
    int64_t hp = h1 < d.H + d.pb ? h1 : d.H + d.pb, wp = w1 < d.W + d.pr ? w1 : d.W + d.pr;
    int64_t padded = (hp - h0) * (wp - w0);
    int64_t hs = h0 > 0 ? h0 : 0, ws = w0 > 0 ? w0 : 0;
    int64_t he = h1 < d.H ? h1 : d.H, we = w1 < d.W ? w1 : d.W;
    const T* xp = x + nc * d.H * d.W;
    float sum = 0.f;
    for (int64_t ih = hs; ih < he; ++ih)
      for (int64_t iw = ws; iw < we; ++iw) sum += to_f(xp[ih * d.W + iw]);
    int64_t cnt = d.countIncludePad ? padded : (he - hs) * (we - ws);
    y[i] = from_f<T>(cnt > 0 ? sum / (float)cnt : 0.f);
  }
}

// One warp per (n, c): strided sum then a shuffle reduction.
template <typename T>
__global__ void k_global_avg(const T* x, T* y, int64_t NC, int64_t HW) {
  int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= NC) return;
  const T* xp = x + warp * HW;
  float s = 0.f;
  for (int64_t i = lane; i < HW; i += 32) s += to_f(xp[i]);
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) y[warp] = from_f<T>(s / (float)HW);
}
}  // namespace

cudaError_t avgpool2d(Prec p, const void* x, void* y, const PoolDesc& d, cudaStream_t s) {
  int64_t n = d.NC * d.OH * d.OW;
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_avgpool<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                     d, n);
    return cudaGetLastError();
  });
}

cudaError_t global_avgpool(Prec p, const void* x, void* y, int64_t NC, int64_t HW,
                           cudaStream_t s) {
  if (NC <= 0) return cudaSuccess;
  unsigned blocks = static_cast<unsigned>((NC * 32 + kThreads - 1) / kThreads);
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_global_avg<T><<<blocks, kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), NC,
                                                 HW);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
