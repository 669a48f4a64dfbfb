// ReduceMean / ReduceSum / ReduceMax: one thread per output element walking the reduced
// index space (the reductions transformers emit are over short trailing rows, and the
// fused LayerNorm takes the hot one).
#include <cfloat>

#include "common.cuh"

namespace memlane::cuda {
namespace {

struct Geometry {
  int kept = 0, red = 0;
  int64_t kdims[kMaxRank] = {}, kstride[kMaxRank] = {};  // kept dims, their input strides
  int64_t rdims[kMaxRank] = {}, rstride[kMaxRank] = {};  // reduced dims, their input strides
  int64_t outputs = 1, count = 1;
};

template <typename T>
__global__ void k_reduce(ReduceOp op, const T* x, T* y, Geometry g) {
  MEMLANE_GRID_STRIDE(o, g.outputs) {
    int64_t rem = o, base = 0;
    for (int i = g.kept - 1; i >= 0; --i) {
      base += (rem % g.kdims[i]) * g.kstride[i];
      rem /= g.kdims[i];
    }
    float acc = op == ReduceOp::kMax ? -FLT_MAX : 0.f;
    for (int64_t j = 0; j < g.count; ++j) {
      int64_t rr = j, off = base;
      for (int i = g.red - 1; i >= 0; --i) {
        off += (rr % g.rdims[i]) * g.rstride[i];
        rr /= g.rdims[i];
      }
      const float v = to_f(x[off]);
      acc = op == ReduceOp::kMax ? fmaxf(acc, v) : acc + v;
    }
    y[o] = from_f<T>(op == ReduceOp::kMean ? acc / float(g.count) : acc);
  }
}

}  // namespace

cudaError_t reduce(ReduceOp k, Prec p, const void* x, void* y, const ReduceDesc& d, cudaStream_t s) {
  Geometry g;
  int64_t stride = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    if (d.reduced[i]) {
      g.rdims[g.red] = d.dims[i];
      g.rstride[g.red++] = stride;
      g.count *= d.dims[i];
    } else {
      g.kdims[g.kept] = d.dims[i];
      g.kstride[g.kept++] = stride;
      g.outputs *= d.dims[i];
    }
    stride *= d.dims[i];
  }
  // Collected innermost first: reverse into row-major order.
  for (int i = 0; i < g.kept / 2; ++i) {
    int64_t t = g.kdims[i]; g.kdims[i] = g.kdims[g.kept - 1 - i]; g.kdims[g.kept - 1 - i] = t;
    t = g.kstride[i]; g.kstride[i] = g.kstride[g.kept - 1 - i]; g.kstride[g.kept - 1 - i] = t;
  }
  for (int i = 0; i < g.red / 2; ++i) {
    int64_t t = g.rdims[i]; g.rdims[i] = g.rdims[g.red - 1 - i]; g.rdims[g.red - 1 - i] = t;
    t = g.rstride[i]; g.rstride[i] = g.rstride[g.red - 1 - i]; g.rstride[g.red - 1 - i] = t;
  }
  if (g.outputs <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_reduce<T><<<blocks_for(g.outputs), kThreads, 0, s>>>(k, static_cast<const T*>(x), static_cast<T*>(y), g);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
