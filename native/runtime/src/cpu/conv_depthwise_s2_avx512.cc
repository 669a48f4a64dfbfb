#include "cpu/conv_depthwise_s2_avx512.h"

#include <algorithm>
#include <cstdlib>

#include "cpu/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu/conv_act_avx512.h"
#include "cpu/simd/lanes_avx512.h"
#define MEMLANE_DWS2_AVX512 1
#endif

namespace memlane::cpu {

#ifndef MEMLANE_DWS2_AVX512
bool dw_s2_direct_applies(const DwGeom&) { return false; }
void dw_channel_s2_direct(const DwGeom&, const float*, const float*, float, float*, const ConvAct&) { std::abort(); }
#else

namespace {

#define MEMLANE_DWS2_TARGET __attribute__((target("avx512f")))

// Output vectors (16 columns each) whose accumulators stay in registers while the kernel's
// rows stream past: 8 covers a 128-wide output row in one pass.
constexpr int kVectors = 8;

// Input planes above 24 KiB (half of L1d here). Per-op minima, batch 1, 1 thread, this path
// against the phase planes and the channel-blocked kernel (4 configurations interleaved, best
// of 3): 112x112 3x3 96 ch 340 / 508 / 415 us, 112x112 5x5 164 / 358 / 188, 96x96 5x5 176 /
// 359 / 215, 80x80 3x3 123 / 121 / 143 (even), 56x56 3x3 173 / 118 / 174, 28x28 136 / 60 / 56.
// A plane that stays in L1 is copied cheaply, and the copy's taps are loads where these are
// permutes (9 shuffles a 3x3 output vector, all on one port).
constexpr int64_t kDirectMinPlaneFloats = 6 * 1024;

// Output row oh, columns [ow0, ow0 + 16 * nv) (the last vector may pass OW: not stored).
// Output column o's tap j reads input column 2 * o - pl + j: for the vector at o0 those are
// the even (j even) or odd (j odd) columns from 2 * o0 - pl, shifted by j / 2 lanes.
template <int KW>
MEMLANE_DWS2_TARGET void row_chunk(const DwGeom& g, const float* x, const float* w, __m512 b, float* yr, int64_t oh,
                                   int64_t ow0, int nv, const ConvAct& act) {
  using simd::even_lanes, simd::load_in_row, simd::odd_lanes, simd::shift_lanes;
  __m512 acc[kVectors];
  for (int k = 0; k < nv; ++k) acc[k] = b;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = oh * g.sh - g.pt + i * g.dh;
    if (ih < 0 || ih >= g.H) continue;  // a padding row: its taps add zero
    const float* row = x + ih * g.W;
    const float* wr = w + i * KW;
    int64_t c = 2 * ow0 - g.pl;
    const __m512 a0 = load_in_row(row, c, g.W), a1 = load_in_row(row, c + 16, g.W);
    __m512 e = even_lanes(a0, a1), o = odd_lanes(a0, a1);
    for (int k = 0; k < nv; ++k) {
      c += 32;
      const __m512 n0 = load_in_row(row, c, g.W), n1 = load_in_row(row, c + 16, g.W);
      const __m512 en = even_lanes(n0, n1), on = odd_lanes(n0, n1);
      __m512 s = acc[k];
      s = _mm512_fmadd_ps(_mm512_set1_ps(wr[0]), e, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(wr[1]), o, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(wr[2]), shift_lanes<1>(e, en), s);
      if constexpr (KW == 5) {
        s = _mm512_fmadd_ps(_mm512_set1_ps(wr[3]), shift_lanes<1>(o, on), s);
        s = _mm512_fmadd_ps(_mm512_set1_ps(wr[4]), shift_lanes<2>(e, en), s);
      }
      acc[k] = s;
      e = en;
      o = on;
    }
  }
  for (int k = 0; k < nv; ++k) {
    const int64_t o0 = ow0 + 16 * k, n = std::min<int64_t>(16, g.OW - o0);
    const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    _mm512_mask_storeu_ps(yr + o0, m, act_vec16(acc[k], act));
  }
}

template <int KW>
MEMLANE_DWS2_TARGET void channel(const DwGeom& g, const float* x, const float* w, float bias, float* y,
                                 const ConvAct& act) {
  const __m512 b = _mm512_set1_ps(bias);
  const int64_t vectors = (g.OW + 15) / 16;
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t v0 = 0; v0 < vectors; v0 += kVectors)
      row_chunk<KW>(g, x, w, b, y + oh * g.OW, oh, v0 * 16, int(std::min<int64_t>(kVectors, vectors - v0)), act);
}

}  // namespace

bool dw_s2_direct_applies(const DwGeom& g) {
  static const bool off = std::getenv("MEMLANE_DW_S2_PHASES") != nullptr;
  return !off && g.sw == 2 && g.dw == 1 && (g.kw == 3 || g.kw == 5) && g.H * g.W > kDirectMinPlaneFloats &&
         use_avx512f();
}

void dw_channel_s2_direct(const DwGeom& g, const float* x, const float* w, float bias, float* y, const ConvAct& act) {
  if (g.kw == 3) channel<3>(g, x, w, bias, y, act);
  else channel<5>(g, x, w, bias, y, act);
}

#endif

}  // namespace memlane::cpu
