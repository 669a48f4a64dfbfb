#include "cpu/conv_flat.h"
#include "cpu/cpu_features.h"

#include <algorithm>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMLANE_CONV_FLAT 1
#endif

namespace memlane::cpu {

int64_t conv_flat_scratch(int64_t OH, int64_t Wp) { return 8 * ((OH * Wp + 15) / 16 * 16); }

#ifdef MEMLANE_CONV_FLAT
namespace {

struct Flat {
  const float* pad;
  int64_t C, plane, K, T, Lr;  // T taps, Lr: the OH * Wp grid points rounded up to 16
  const int64_t* off;             // tap offsets on the grid
};

// MB channels x NV vectors of 16 grid points from q0; results to prod rows (stride Lr).
template <int MB, int NV>
__attribute__((target("avx512f"))) inline void block(const Flat& f, const float* w, const float* bias, float* prod,
                                                     int64_t q0) {
  __m512 acc[MB][NV];
  for (int r = 0; r < MB; ++r) {
    const __m512 b = _mm512_set1_ps(bias ? bias[r] : 0.f);
    for (int v = 0; v < NV; ++v) acc[r][v] = b;
  }
  for (int64_t c = 0; c < f.C; ++c) {
    const float* pc = f.pad + c * f.plane + q0;
    const float* wc = w + c * f.T;
    for (int64_t t = 0; t < f.T; ++t) {
      __m512 x[NV];
      for (int v = 0; v < NV; ++v) x[v] = _mm512_loadu_ps(pc + f.off[t] + 16 * v);
      for (int r = 0; r < MB; ++r) {
        const __m512 wv = _mm512_set1_ps(wc[r * f.K + t]);
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(wv, x[v], acc[r][v]);
      }
    }
  }
  for (int r = 0; r < MB; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(prod + r * f.Lr + q0 + 16 * v, acc[r][v]);
}

template <int MB>
__attribute__((target("avx512f"))) void rows(const Flat& f, const float* w, const float* bias, float* prod) {
  int64_t q = 0;
  for (; q + 32 <= f.Lr; q += 32) block<MB, 2>(f, w, bias, prod, q);
  if (q < f.Lr) block<MB, 1>(f, w, bias, prod, q);
}

}  // namespace

bool conv_flat_available() {
  static const bool has = use_avx512f();
  return has;
}

void conv_flat(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
               int64_t dh, int64_t dw, const float* bias, float* y, int64_t M, int64_t OH, int64_t OW, bool relu,
               const float* res, float* scratch) {
  int64_t off[kConvFlatMaxTaps];
  const int64_t T = kh * kw;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) off[i * kw + j] = i * dh * Wp + j * dw;
  const Flat f{pad, C, Hp * Wp, C * T, T, (OH * Wp + 15) / 16 * 16, off};
  const int64_t P = OH * OW;
  for (int64_t m = 0; m < M;) {
    const int64_t mb = M - m >= 8 ? 8 : M - m >= 4 ? 4 : 1;
    const float* bm = bias ? bias + m : nullptr;
    if (mb == 8) rows<8>(f, w + m * f.K, bm, scratch);
    else if (mb == 4) rows<4>(f, w + m * f.K, bm, scratch);
    else rows<1>(f, w + m * f.K, bm, scratch);
    // drop the grid's extra columns; residual and activation on the way out
    for (int64_t r = 0; r < mb; ++r) {
      float* yr = y + (m + r) * P;
      const float* rr = res ? res + (m + r) * P : nullptr;
      const float* pr = scratch + r * f.Lr;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float v = pr[oh * Wp + ow];
          if (rr) v += rr[oh * OW + ow];
          yr[oh * OW + ow] = relu ? std::max(v, 0.f) : v;
        }
    }
    m += mb;
  }
}

#else

bool conv_flat_available() { return false; }
void conv_flat(const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, const float*,
               float*, int64_t, int64_t, int64_t, bool, const float*, float*) {}

#endif

}  // namespace memlane::cpu
