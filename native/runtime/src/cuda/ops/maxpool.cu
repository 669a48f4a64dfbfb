// MaxPool2d (dilations, asymmetric pads; ceil mode is in the output size the plan gives).
#include <cfloat>

#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_maxpool(const T* x, T* y, PoolDesc d, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t ow = i % d.OW, t = i / d.OW;
    int64_t oh = t % d.OH, nc = t / d.OH;
    const T* xp = x + nc * d.H * d.W;
    float m = -FLT_MAX;
    for (int a = 0; a < d.kh; ++a) {
      int64_t ih = oh * d.sh - d.pt + a * d.dh;
      if (ih < 0 || ih >= d.H) continue;
      for (int b = 0; b < d.kw; ++b) {
        int64_t iw = ow * d.sw - d.pl + b * d.dw;
        if (iw < 0 || iw >= d.W) continue;
        float v = to_f(xp[ih * d.W + iw]);
        m = v > m ? v : m;
      }
    }
    y[i] = from_f<T>(m);
  }
}
}  // namespace

cudaError_t maxpool2d(Prec p, const void* x, void* y, const PoolDesc& d, cudaStream_t s) {
  int64_t n = d.NC * d.OH * d.OW;
  if (n <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_maxpool<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                     d, n);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
