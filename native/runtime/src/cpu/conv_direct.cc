#include "cpu/conv_direct.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMLANE_CONV_DIRECT 1
#endif

namespace memlane::cpu {

#ifdef MEMLANE_CONV_DIRECT
namespace {

struct Geo {
  const float* pad;
  int64_t C, Hp, Wp, kh, kw, dh, dw, K, OH, OW;
};

// MB output channels x 16 columns: one row at ow0 (two_rows = false), or rows oh and oh+1
// of an 8-wide map packed in one vector (two_rows = true).
// KH/KW > 0: the kernel size fixed at compile time (3x3 unrolls); 0: read from g.
template <int MB, bool kTwoRows, int KH, int KW>
__attribute__((target("avx512f"))) inline void block(const Geo& g, const float* w, const float* bias, float* y,
                                                     int64_t oh, int64_t ow0, bool relu) {
  const int64_t kh = KH > 0 ? KH : g.kh, kw = KW > 0 ? KW : g.kw;
  __m512 acc[MB];
  for (int r = 0; r < MB; ++r) acc[r] = _mm512_set1_ps(bias ? bias[r] : 0.f);
  const int64_t plane = g.Hp * g.Wp;
  for (int64_t c = 0; c < g.C; ++c) {
    const float* pc = g.pad + c * plane + oh * g.Wp + ow0;
    const float* wc = w + c * kh * kw;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        const float* src = pc + i * g.dh * g.Wp + j * g.dw;
        __m512 x;
        if (kTwoRows)
          x = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(src))),
                                                  _mm256_castps_pd(_mm256_loadu_ps(src + g.Wp)), 1));
        else
          x = _mm512_loadu_ps(src);
        const float* wt = wc + i * kw + j;
        for (int r = 0; r < MB; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(wt[r * g.K]), x, acc[r]);
      }
  }
  const __m512 z = _mm512_setzero_ps();
  for (int r = 0; r < MB; ++r)
    _mm512_storeu_ps(y + r * g.OH * g.OW + oh * g.OW + ow0, relu ? _mm512_max_ps(acc[r], z) : acc[r]);
}

template <bool kTwoRows, int KH, int KW>
__attribute__((target("avx512f"))) void run_all(const Geo& g, const float* w, const float* bias, float* y, int64_t M,
                                                 bool relu) {
  const int64_t rowStep = kTwoRows ? 2 : 1, colStep = kTwoRows ? g.OW : 16;
  for (int64_t oh = 0; oh < g.OH; oh += rowStep)
    for (int64_t ow = 0; ow < g.OW; ow += colStep) {
      int64_t m = 0;
      for (; m + 8 <= M; m += 8)
        block<8, kTwoRows, KH, KW>(g, w + m * g.K, bias ? bias + m : nullptr, y + m * g.OH * g.OW, oh, ow, relu);
      for (; m < M; ++m)
        block<1, kTwoRows, KH, KW>(g, w + m * g.K, bias ? bias + m : nullptr, y + m * g.OH * g.OW, oh, ow, relu);
    }
}

bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

}  // namespace

bool conv_direct_supported(int64_t OH, int64_t OW) {
  return cpu_has_avx512f() && OW > 0 && OH > 0 && (OW % 16 == 0 || (OW == 8 && OH % 2 == 0));
}

void conv_direct(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
                 int64_t dh, int64_t dw, const float* bias, float* y, int64_t M, int64_t OH, int64_t OW, bool relu) {
  const Geo g{pad, C, Hp, Wp, kh, kw, dh, dw, C * kh * kw, OH, OW};
  const bool k3 = kh == 3 && kw == 3;
  if (OW % 16 == 0) k3 ? run_all<false, 3, 3>(g, w, bias, y, M, relu) : run_all<false, 0, 0>(g, w, bias, y, M, relu);
  else k3 ? run_all<true, 3, 3>(g, w, bias, y, M, relu) : run_all<true, 0, 0>(g, w, bias, y, M, relu);
}

#else

bool conv_direct_supported(int64_t, int64_t) { return false; }
void conv_direct(const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t,
                 const float*, float*, int64_t, int64_t, int64_t, bool) {}

#endif

}  // namespace memlane::cpu
