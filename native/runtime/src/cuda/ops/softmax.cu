// Softmax (or LogSoftmax) over the middle dimension of [outer, axis, inner], max-subtracted,
// one thread per (outer, inner) row (classifier heads are short rows).
#include <cfloat>

#include "common.cuh"

namespace memlane::cuda {
namespace {
template <typename T>
__global__ void k_softmax(const T* x, T* y, int64_t outer, int64_t axis, int64_t inner, bool log) {
  MEMLANE_GRID_STRIDE(r, outer * inner) {
    int64_t o = r / inner, in = r % inner;
    const T* xp = x + o * axis * inner + in;
    T* yp = y + o * axis * inner + in;
    // Inputs are clamped at -FLT_MAX: a row of -inf (a masked row) stays finite and comes
    // out uniform instead of NaN (-inf - -inf), and a -inf among finite values gives 0.
    auto at = [&](int64_t a) { return fmaxf(to_f(xp[a * inner]), -FLT_MAX); };
    float m = -FLT_MAX;
    for (int64_t a = 0; a < axis; ++a) m = fmaxf(m, at(a));
    float s = 0.f;
    for (int64_t a = 0; a < axis; ++a) s += expf(at(a) - m);
    if (log) {
      const float shift = m + logf(s);
      for (int64_t a = 0; a < axis; ++a) yp[a * inner] = from_f<T>(at(a) - shift);
      continue;
    }
    float inv = 1.f / s;
    for (int64_t a = 0; a < axis; ++a) yp[a * inner] = from_f<T>(expf(at(a) - m) * inv);
  }
}
}  // namespace

cudaError_t softmax(Prec p, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner, bool log,
                    cudaStream_t s) {
  int64_t n = outer * inner;
  if (n <= 0 || axis <= 0) return cudaSuccess;
  return dispatch(p, [&](auto tag) {
    using T = decltype(tag);
    k_softmax<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                     outer, axis, inner, log);
    return cudaGetLastError();
  });
}

}  // namespace memlane::cuda
