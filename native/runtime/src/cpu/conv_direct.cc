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
  int64_t C, Hp, Wp, kh, kw, dh, dw, sh, K, OH, OW;
};

// Even lanes of (a, b): the 16 outputs of a stride-2 row from 32 consecutive inputs; with
// kTwoRows the first 8 even lanes of a and of b.
__attribute__((target("avx512f"))) inline __m512 evens(__m512 a, __m512 b, bool twoRows) {
  const __m512i one = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(a, one, b);
  (void)twoRows;
}

// MB output channels x NV vectors of 16 outputs. A vector holds 16 columns of one row
// (kTwoRows = false; vector v is row oh + v) or 8 columns of two rows (kTwoRows = true; vector
// v is rows oh + 2v and oh + 2v + 1). Two vectors per tap make it FMA-bound rather than
// bound by the weight broadcasts. KH/KW > 0 fix the kernel size (3x3 unrolls); 0 reads g.
template <int MB, int NV, bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) inline void block(const Geo& g, const float* w, const float* bias, float* y,
                                                     int64_t oh, int64_t ow0, bool relu) {
  const int64_t kh = KH > 0 ? KH : g.kh, kw = KW > 0 ? KW : g.kw;
  constexpr int64_t kRowsPerVec = kTwoRows ? 2 : 1;
  __m512 acc[MB][NV];
  for (int r = 0; r < MB; ++r) {
    const __m512 b0 = _mm512_set1_ps(bias ? bias[r] : 0.f);
    for (int v = 0; v < NV; ++v) acc[r][v] = b0;
  }
  const int64_t plane = g.Hp * g.Wp;
  for (int64_t c = 0; c < g.C; ++c) {
    const float* pc = g.pad + c * plane + oh * g.sh * g.Wp + ow0 * SW;
    const float* wc = w + c * kh * kw;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        __m512 x[NV];
        for (int v = 0; v < NV; ++v) {
          const float* src = pc + (v * kRowsPerVec * g.sh + i * g.dh) * g.Wp + j * g.dw;
          if (SW == 2) {
            // stride 2: the even lanes of 32 inputs (one row), or of 16 inputs of two rows
            x[v] = kTwoRows ? evens(_mm512_loadu_ps(src), _mm512_loadu_ps(src + g.sh * g.Wp), true)
                            : evens(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16), false);
          } else if (kTwoRows) {
            x[v] = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(src))),
                                                       _mm256_castps_pd(_mm256_loadu_ps(src + g.sh * g.Wp)), 1));
          } else {
            x[v] = _mm512_loadu_ps(src);
          }
        }
        const float* wt = wc + i * kw + j;
        for (int r = 0; r < MB; ++r) {
          const __m512 wv = _mm512_set1_ps(wt[r * g.K]);
          for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(wv, x[v], acc[r][v]);
        }
      }
  }
  const __m512 z = _mm512_setzero_ps();
  for (int r = 0; r < MB; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_storeu_ps(y + r * g.OH * g.OW + (oh + v * kRowsPerVec) * g.OW + ow0,
                       relu ? _mm512_max_ps(acc[r][v], z) : acc[r][v]);
}

template <int NV, bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) inline void channels(const Geo& g, const float* w, const float* bias, float* y,
                                                        int64_t M, int64_t oh, int64_t ow, bool relu) {
  int64_t m = 0;
  const int64_t ostride = g.OH * g.OW;
  for (; m + 8 <= M; m += 8)
    block<8, NV, kTwoRows, KH, KW, SW>(g, w + m * g.K, bias ? bias + m : nullptr, y + m * ostride, oh, ow, relu);
  for (; m + 4 <= M; m += 4)
    block<4, NV, kTwoRows, KH, KW, SW>(g, w + m * g.K, bias ? bias + m : nullptr, y + m * ostride, oh, ow, relu);
  for (; m < M; ++m)
    block<1, NV, kTwoRows, KH, KW, SW>(g, w + m * g.K, bias ? bias + m : nullptr, y + m * ostride, oh, ow, relu);
}

template <bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) void run_all(const Geo& g, const float* w, const float* bias, float* y, int64_t M,
                                                 bool relu) {
  const int64_t rowsPerVec = kTwoRows ? 2 : 1, colStep = kTwoRows ? g.OW : 16;
  int64_t oh = 0;
  for (; oh + 2 * rowsPerVec <= g.OH; oh += 2 * rowsPerVec)
    for (int64_t ow = 0; ow < g.OW; ow += colStep) channels<2, kTwoRows, KH, KW, SW>(g, w, bias, y, M, oh, ow, relu);
  for (; oh < g.OH; oh += rowsPerVec)
    for (int64_t ow = 0; ow < g.OW; ow += colStep) channels<1, kTwoRows, KH, KW, SW>(g, w, bias, y, M, oh, ow, relu);
}

bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

}  // namespace

bool conv_direct_supported(int64_t OH, int64_t OW, int64_t sw) {
  return cpu_has_avx512f() && OW > 0 && OH > 0 && (sw == 1 || sw == 2) && (OW % 16 == 0 || (OW == 8 && OH % 2 == 0));
}

void conv_direct(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
                 int64_t sh, int64_t sw, int64_t dh, int64_t dw, const float* bias, float* y, int64_t M, int64_t OH,
                 int64_t OW, bool relu) {
  const Geo g{pad, C, Hp, Wp, kh, kw, dh, dw, sh, C * kh * kw, OH, OW};
  const bool k3 = kh == 3 && kw == 3, wide = OW % 16 == 0;
  if (sw == 1) {
    if (wide) k3 ? run_all<false, 3, 3, 1>(g, w, bias, y, M, relu) : run_all<false, 0, 0, 1>(g, w, bias, y, M, relu);
    else k3 ? run_all<true, 3, 3, 1>(g, w, bias, y, M, relu) : run_all<true, 0, 0, 1>(g, w, bias, y, M, relu);
  } else {
    if (wide) k3 ? run_all<false, 3, 3, 2>(g, w, bias, y, M, relu) : run_all<false, 0, 0, 2>(g, w, bias, y, M, relu);
    else k3 ? run_all<true, 3, 3, 2>(g, w, bias, y, M, relu) : run_all<true, 0, 0, 2>(g, w, bias, y, M, relu);
  }
}

#else

bool conv_direct_supported(int64_t, int64_t, int64_t) { return false; }
void conv_direct(const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, const float*, float*, int64_t, int64_t, int64_t, bool) {}

#endif

}  // namespace memlane::cpu
