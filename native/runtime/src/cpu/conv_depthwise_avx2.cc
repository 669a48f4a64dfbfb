#include "cpu/conv_depthwise_avx2.h"

#ifdef MEMLANE_DW_AVX2
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>

#include "cpu/conv_act_avx2.h"
#include "cpu/simd/lanes_avx2.h"

namespace memlane::cpu {
namespace {

using simd::first_lanes8;
using simd::store_first8;

// Any kernel size (3x3 and 5x5 take channel_rows): one output row at a time, each tap's offset
// and weight cached up to 49 taps, read again for each vector past that.
void channel_any(const DwGeom& g, const float* s, const float* w, float bias, float* y, const ConvAct& act) {
  const int64_t kh = g.kh, kw = g.kw, Wq = g.Wq(), plane = g.Hp() * Wq;
  constexpr int kMaxTaps = 49;
  int64_t off[kMaxTaps];
  __m256 wv[kMaxTaps];
  const bool cached = kh * kw <= kMaxTaps;
  if (cached)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        off[i * kw + j] = dw_tap_offset(g, plane, Wq, i, j);
        wv[i * kw + j] = _mm256_set1_ps(w[i * kw + j]);
      }
  const __m256 b = _mm256_set1_ps(bias);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* row = s + oh * g.sh * Wq;
    float* yr = y + oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ow += 8) {
      __m256 acc = b;
      if (cached) {
        for (int64_t t = 0; t < kh * kw; ++t) acc = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(row + off[t] + ow), acc);
      } else {
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(w[i * kw + j]),
                                  _mm256_loadu_ps(row + dw_tap_offset(g, plane, Wq, i, j) + ow), acc);
      }
      store_first8(yr + ow, g.OW - ow, act_vec8(acc, act));
    }
  }
}

// KHxKW: R output rows at once, 8 columns a step, each tap's weight broadcast once for the R
// rows: R independent FMA chains (one chain of 25 FMAs a vector, as channel_any runs, was
// latency-bound: efficientnet_b0's 5x5 convs took 1.5-2x as long).
template <int KH, int KW, int R>
void rows_block(const DwGeom& g, const float* s, const int64_t* off, const __m256* wv, __m256 b, int64_t oh,
                float* y, const ConvAct& act) {
  const int64_t Wq = g.Wq(), step = g.sh * Wq;
  const float* row = s + oh * step;
  float* yr = y + oh * g.OW;
  for (int64_t ow = 0; ow < g.OW; ow += 8) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = b;
    for (int t = 0; t < KH * KW; ++t) {
      const float* p = row + off[t] + ow;
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(p + r * step), acc[r]);
    }
    for (int r = 0; r < R; ++r) store_first8(yr + r * g.OW + ow, g.OW - ow, act_vec8(acc[r], act));
  }
}

template <int KH, int KW>
void channel_rows(const DwGeom& g, const float* s, const float* w, float bias, float* y, const ConvAct& act) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  int64_t off[KH * KW];
  __m256 wv[KH * KW];
  for (int i = 0; i < KH; ++i)
    for (int j = 0; j < KW; ++j) {
      off[i * KW + j] = dw_tap_offset(g, plane, Wq, i, j);
      wv[i * KW + j] = _mm256_set1_ps(w[i * KW + j]);
    }
  const __m256 b = _mm256_set1_ps(bias);
  int64_t oh = 0;
  for (; oh + 4 <= g.OH; oh += 4) rows_block<KH, KW, 4>(g, s, off, wv, b, oh, y, act);
  // the last OH % 4 rows in one block too (7x7 maps: 4 + 3, not 4 + 1 + 1 + 1)
  if (g.OH - oh == 3) rows_block<KH, KW, 3>(g, s, off, wv, b, oh, y, act);
  else if (g.OH - oh == 2) rows_block<KH, KW, 2>(g, s, off, wv, b, oh, y, act);
  else if (g.OH - oh == 1) rows_block<KH, KW, 1>(g, s, off, wv, b, oh, y, act);
}

// 3x3, row dilation 1: two output rows at once (independent accumulators; with row stride 1
// they share two input rows, so each load of those feeds two FMAs). Measured slower on
// mobilenet_v2's 3x3 convs: two vectors of each row a step (1.1-1.2x the time), channel_rows'
// four rows a pass (1.15-1.45x).
template <int SH>
void channel_rows2(const DwGeom& g, const float* s, const float* w, float bias, float* y, const ConvAct& act) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  int64_t off[3];
  __m256 wv[9];
  for (int j = 0; j < 3; ++j) off[j] = dw_tap_offset(g, plane, Wq, 0, j);
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const __m256 b = _mm256_set1_ps(bias);
  constexpr int kRows = SH + 3;  // input rows two output rows read
  for (int64_t oh = 0; oh < g.OH; oh += 2) {
    const float* row = s + oh * SH * Wq;
    float* y0 = y + oh * g.OW;
    float* y1 = y0 + g.OW;
    const bool pair = oh + 1 < g.OH;  // the last row alone: its partner's loads stay in the plane
    for (int64_t ow = 0; ow < g.OW; ow += 8) {
      __m256 a0 = b, a1 = b;
      for (int r = 0; r < (pair ? kRows : 3); ++r)
        for (int j = 0; j < 3; ++j) {
          const __m256 v = _mm256_loadu_ps(row + r * Wq + off[j] + ow);
          if (r < 3) a0 = _mm256_fmadd_ps(wv[r * 3 + j], v, a0);
          if (r >= SH && r - SH < 3) a1 = _mm256_fmadd_ps(wv[(r - SH) * 3 + j], v, a1);
        }
      store_first8(y0 + ow, g.OW - ow, act_vec8(a0, act));
      if (pair) store_first8(y1 + ow, g.OW - ow, act_vec8(a1, act));
    }
  }
}

// KHxKW at row stride SH (row dilation 1): R output rows a pass, one tap column j at a time,
// its KH weights in registers; each input row of the pass is loaded once for that column and
// feeds every output row whose window holds it (up to KH / SH of them). R + KH + 1 ymm
// registers; 0.4 loads a FMA at 5x5 and R 8, where channel_rows loads 1.25 (an input vector a
// FMA and a weight a tap), and R independent FMA chains. On Zen 3 channel_rows was load-bound:
// mnasnet's 5x5 convs on 28x28 maps ran at a quarter of the FMA peak.
template <int KH, int KW, int SH, int R>
void cols_block(const float* s, int64_t Wq, const int64_t* off, const float* w, __m256 b, int64_t OW, int64_t oh,
                float* y, const ConvAct& act) {
  constexpr int kIn = (R - 1) * SH + KH;  // input rows the pass reads
  const float* rows = s + oh * SH * Wq;
  float* yr = y + oh * OW;
  for (int64_t ow = 0; ow < OW; ow += 8) {
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = b;
#pragma GCC unroll 7
    for (int j = 0; j < KW; ++j) {
      __m256 wj[KH];
#pragma GCC unroll 7
      for (int i = 0; i < KH; ++i) wj[i] = _mm256_broadcast_ss(w + i * KW + j);
      const float* p = rows + off[j] + ow;
#pragma GCC unroll 24
      for (int t = 0; t < kIn; ++t) {
        const __m256 v = _mm256_loadu_ps(p + t * Wq);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int i = t - r * SH;  // the weight row input row t meets in output row r's window
          if (i >= 0 && i < KH) acc[r] = _mm256_fmadd_ps(wj[i], v, acc[r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) store_first8(yr + r * OW + ow, OW - ow, act_vec8(acc[r], act));
  }
}

// Output rows in passes of R (8; 6 at 7x7 for the registers), the last OH % R in one pass.
template <int KH, int KW, int SH>
void channel_cols(const DwGeom& g, const float* s, const float* w, float bias, float* y, const ConvAct& act) {
  constexpr int R = KH > 5 ? 6 : 8;
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  int64_t off[KW];
  for (int j = 0; j < KW; ++j) off[j] = dw_tap_offset(g, plane, Wq, 0, j);
  const __m256 b = _mm256_set1_ps(bias);
  int64_t oh = 0;
  for (; oh + R <= g.OH; oh += R) cols_block<KH, KW, SH, R>(s, Wq, off, w, b, g.OW, oh, y, act);
  switch (g.OH - oh) {
#define MEMLANE_REST(n) \
  case n:               \
    if constexpr (n < R) cols_block<KH, KW, SH, n>(s, Wq, off, w, b, g.OW, oh, y, act); \
    break;
    MEMLANE_REST(7) MEMLANE_REST(6) MEMLANE_REST(5) MEMLANE_REST(4) MEMLANE_REST(3) MEMLANE_REST(2) MEMLANE_REST(1)
#undef MEMLANE_REST
    default: break;
  }
}

// channel_cols for this geometry, if it has one: square 3, 5 or 7 taps, row stride 1 or 2,
// row dilation 1 (column stride and dilation are the phase planes'), except 3x3 at stride 2,
// where channel_rows2 measured 0.88-0.92x its time (mobilenet_v2's and mnasnet's 112 -> 56;
// efficientnet_b0's 1.07x: the five input rows of two output rows are as many loads a FMA as
// eight rows' seventeen, and stay closer in cache).
using ChannelFn = void (*)(const DwGeom&, const float*, const float*, float, float*, const ConvAct&);
ChannelFn cols_kernel(const DwGeom& g) {
  static const bool on = std::getenv("MEMLANE_DW_NO_COLS") == nullptr;  // A/B timing
  if (!on || g.dh != 1 || g.kh != g.kw || (g.sh != 1 && g.sh != 2)) return nullptr;
  switch (g.kh * 10 + g.sh) {
    case 31: return channel_cols<3, 3, 1>;
    case 51: return channel_cols<5, 5, 1>;
    case 52: return channel_cols<5, 5, 2>;
    case 71: return channel_cols<7, 7, 1>;
    case 72: return channel_cols<7, 7, 2>;
    default: return nullptr;
  }
}

}  // namespace

// x[2i] lands on padded column pl + 2i: phase pl % 2, index pl / 2 + i; x[2i+1] likewise. 16
// inputs a step: shuffle_ps picks even (odd) elements within 128-bit lanes, permute4x64 puts
// the lanes in order. (The scalar strided copy cost more than the taps' FMAs.)
void dw_fill_phases_s2_avx2(const DwGeom& g, const float* x, float* s) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  float* even_base = s + (g.pl % 2) * plane + g.pl / 2;
  float* odd_base = s + ((g.pl + 1) % 2) * plane + (g.pl + 1) / 2;
  for (int64_t h = 0; h < g.H; ++h) {
    const float* xr = x + h * g.W;
    float* er = even_base + (g.pt + h) * Wq;
    float* orow = odd_base + (g.pt + h) * Wq;
    for (int64_t w = 0; w < g.W; w += 16) {
      const int64_t n = std::min<int64_t>(16, g.W - w);
      __m256 a, c;
      if (n == 16) {
        a = _mm256_loadu_ps(xr + w);
        c = _mm256_loadu_ps(xr + w + 8);
      } else {  // the row's tail: masked loads never touch memory past the input
        a = _mm256_maskload_ps(xr + w, first_lanes8(std::min<int64_t>(8, n)));
        c = _mm256_maskload_ps(xr + w + 8, first_lanes8(std::max<int64_t>(0, n - 8)));
      }
      // [a0 a2 c0 c2 | a4 a6 c4 c6] -> [a0 a2 a4 a6 c0 c2 c4 c6]; odd likewise
      const __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0x88)), 0xD8));
      const __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0xDD)), 0xD8));
      store_first8(er + w / 2, (n + 1) / 2, e);
      store_first8(orow + w / 2, n / 2, o);
    }
  }
}

void dw_fill_s1_avx2(const DwGeom& g, const float* x, float* s) {
  const int64_t Wq = g.Wq();
  float* base = s + g.pt * Wq + g.pl;
  for (int64_t h = 0; h < g.H; ++h) {
    const float* xr = x + h * g.W;
    float* dst = base + h * Wq;
    int64_t w = 0;
    for (; w + 8 <= g.W; w += 8) _mm256_storeu_ps(dst + w, _mm256_loadu_ps(xr + w));
    // The tail with its lanes past the row as zeros, stored whole: those land in the right
    // border, the next row's left border (both zero) and the next row's first columns, which
    // its own copy then writes (rows go in order; past the last row: the bottom border or the
    // scratch's slack). One store, not up to three.
    if (w < g.W) _mm256_storeu_ps(dst + w, _mm256_maskload_ps(xr + w, first_lanes8(g.W - w)));
  }
}

void dw_channel_avx2(const DwGeom& g, const float* s, const float* w, float bias, float* y, const ConvAct& act) {
  if (const ChannelFn cols = cols_kernel(g)) return cols(g, s, w, bias, y, act);
  static const bool rows2 = std::getenv("MEMLANE_DW_NO_ROWS2") == nullptr;  // A/B timing, as AVX-512's
  if (g.kh == 3 && g.kw == 3 && g.dh == 1 && g.sh == 1 && rows2) channel_rows2<1>(g, s, w, bias, y, act);
  else if (g.kh == 3 && g.kw == 3 && g.dh == 1 && g.sh == 2 && rows2) channel_rows2<2>(g, s, w, bias, y, act);
  else if (g.kh == 3 && g.kw == 3) channel_rows<3, 3>(g, s, w, bias, y, act);
  else if (g.kh == 5 && g.kw == 5) channel_rows<5, 5>(g, s, w, bias, y, act);
  else channel_any(g, s, w, bias, y, act);
}

}  // namespace memlane::cpu

#endif
