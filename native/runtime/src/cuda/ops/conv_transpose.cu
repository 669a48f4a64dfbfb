// ConvTranspose (2-D), computed directly: a thread an output element y[b, m, oh, ow], summing
// in float every input pixel and tap that lands on it (oh + ph - i * dh a multiple of sh,
// the quotient inside the input), bias first. The weight is the plan's [group, M/group, kh,
// kw, C/group] (cpu/conv_transpose.cc), so a tap's C/group weights are contiguous.
#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_conv_transpose(const T* x, const T* w, const T* bias, T* y, ConvDesc d, int64_t n) {
  const int64_t Cg = d.C / d.group, Mg = d.M / d.group, HW = d.H * d.W;
  MEMLANE_GRID_STRIDE(i, n) {
    const int64_t ow = i % d.OW, t = i / d.OW;
    const int64_t oh = t % d.OH, bm = t / d.OH;
    const int64_t m = bm % d.M, b = bm / d.M;
    const int64_t g = m / Mg;
    const T* xg = x + (b * d.C + g * Cg) * HW;
    float acc = bias ? to_f(bias[m]) : 0.f;
    for (int ii = 0; ii < d.kh; ++ii) {
      const int64_t hh = oh + d.ph - int64_t(ii) * d.dh;
      if (hh < 0 || hh % d.sh) continue;
      const int64_t ih = hh / d.sh;
      if (ih >= d.H) continue;
      for (int j = 0; j < d.kw; ++j) {
        const int64_t ww = ow + d.pw - int64_t(j) * d.dw;
        if (ww < 0 || ww % d.sw) continue;
        const int64_t iw = ww / d.sw;
        if (iw >= d.W) continue;
        const T* xp = xg + ih * d.W + iw;
        const T* wp = w + ((m * d.kh + ii) * d.kw + j) * Cg;  // m = g * Mg + (m % Mg): rows in order
        for (int64_t c = 0; c < Cg; ++c) acc += to_f(xp[c * HW]) * to_f(wp[c]);
      }
    }
    y[i] = from_f<T>(acc);
  }
}
}  // namespace

cudaError_t conv_transpose2d(Prec p, const void* x, const void* w, const void* bias, void* y, const ConvDesc& d,
                             cudaStream_t s) {
  const int64_t n = d.N * d.M * d.OH * d.OW;
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_conv_transpose<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                          static_cast<const T*>(bias), static_cast<T*>(y), d, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
