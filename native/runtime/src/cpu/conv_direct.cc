#include "cpu/conv_direct.h"
#include "cpu/cpu_features.h"
#include "cpu/conv_act_avx512.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu/simd/lanes_avx512.h"
#define MEMLANE_CONV_DIRECT 1
#endif

namespace memlane::cpu {

#ifdef MEMLANE_CONV_DIRECT
namespace {

// Narrowest output row the masked tail takes: below it most lanes of a vector would idle.
constexpr int64_t kDirectTailMinWidth = 12;

// Wp: the row stride of the layout (the padded width; for stride 2 the half width), plane:
// floats per channel, half: offset of the odd-column plane (stride 2).
struct Geo {
  const float* pad;
  int64_t C, Hp, Wp, kh, kw, dh, dw, sh, K, OH, OW, plane, half;
};

// MB output channels x NV vectors of 16 outputs. A vector holds 16 columns of one row
// (kTwoRows = false; vector v is row oh + v) or 8 columns of two rows (kTwoRows = true; vector
// v is rows oh + 2v and oh + 2v + 1). Two vectors per tap make it FMA-bound rather than
// bound by the weight broadcasts. KH/KW > 0 fix the kernel size (3x3 unrolls); 0 reads g.
template <int MB, int NV, bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) inline void block(const Geo& g, const float* w, const float* bias, float* y,
                                                     const float* res, int64_t oh, int64_t ow0, const ConvAct& act,
                                                     __mmask16 mk) {
  const int64_t kh = KH > 0 ? KH : g.kh, kw = KW > 0 ? KW : g.kw;
  constexpr int64_t kRowsPerVec = kTwoRows ? 2 : 1;
  __m512 acc[MB][NV];
  for (int r = 0; r < MB; ++r) {
    const __m512 b0 = _mm512_set1_ps(bias ? bias[r] : 0.f);
    for (int v = 0; v < NV; ++v) acc[r][v] = b0;
  }
  for (int64_t c = 0; c < g.C; ++c) {
    const float* pc = g.pad + c * g.plane + oh * g.sh * g.Wp + ow0;
    const float* wc = w + c * kh * kw;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        __m512 x[NV];
        // stride 2: input column 2*ow + j*dw lies in the even or odd plane at ow + (j*dw)/2
        const int64_t col = SW == 2 ? ((j * g.dw) & 1) * g.half + ((j * g.dw) >> 1) : j * g.dw;
        for (int v = 0; v < NV; ++v) {
          const float* src = pc + (v * kRowsPerVec * g.sh + i * g.dh) * g.Wp + col;
          if (kTwoRows) {
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
  for (int r = 0; r < MB; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t at = r * g.OH * g.OW + (oh + v * kRowsPerVec) * g.OW + ow0;
      // mk: the columns of a row's last, partial vector (all 16 elsewhere)
      const __m512 o = res ? _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(mk, res + at)) : acc[r][v];
      _mm512_mask_storeu_ps(y + at, mk, act_vec16(o, act));
    }
}

// One band of output rows (NV vectors' rows) for every output channel: a block of channels runs
// along the whole band before the next block starts. The other order (every channel block at
// one column, then the next column) stored into 2 x M output rows at once: past what the
// hardware prefetchers follow, each cache line of a cold output (a stem's, after the rest of
// the network evicted it) cost a miss on its first store. 3 -> 32 stride-2 stems measured
// 1.2-1.9x their time as a lone conv inside whole models that way (mnasnet1_0, efficientnet_b0,
// regnet_x_800mf).
template <int MB, int NV, bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) inline void band(const Geo& g, const float* w, const float* bias, float* y,
                                                    const float* res, int64_t m, int64_t oh, const ConvAct& act) {
  const int64_t ostride = g.OH * g.OW, colStep = kTwoRows ? g.OW : 16;
  const float* rm = res ? res + m * ostride : nullptr;
  for (int64_t ow = 0; ow < g.OW; ow += colStep) {
    // mk: the columns of a row's last, partial vector (OW not a multiple of 16): its loads run
    // on into the next row or the slack, and only its valid columns are stored.
    const int64_t n = kTwoRows ? 16 : std::min<int64_t>(16, g.OW - ow);
    const __mmask16 mk = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1);
    block<MB, NV, kTwoRows, KH, KW, SW>(g, w + m * g.K, bias ? bias + m : nullptr, y + m * ostride, rm, oh, ow, act, mk);
  }
}

template <int NV, bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) inline void channels(const Geo& g, const float* w, const float* bias, float* y,
                                                        const float* res, int64_t M, int64_t oh, const ConvAct& act) {
  int64_t m = 0;
  for (; m + 8 <= M; m += 8) band<8, NV, kTwoRows, KH, KW, SW>(g, w, bias, y, res, m, oh, act);
  for (; m + 4 <= M; m += 4) band<4, NV, kTwoRows, KH, KW, SW>(g, w, bias, y, res, m, oh, act);
  for (; m < M; ++m) band<1, NV, kTwoRows, KH, KW, SW>(g, w, bias, y, res, m, oh, act);
}

// Output rows [oh0, oh1) (oh0 a multiple of conv_direct_row_step).
template <bool kTwoRows, int KH, int KW, int SW>
__attribute__((target("avx512f"))) void run_all(const Geo& g, const float* w, const float* bias, float* y,
                                                 const float* res, int64_t M, const ConvAct& act, int64_t oh0,
                                                 int64_t oh1) {
  const int64_t rowsPerVec = kTwoRows ? 2 : 1;
  int64_t oh = oh0;
  for (; oh + 2 * rowsPerVec <= oh1; oh += 2 * rowsPerVec) channels<2, kTwoRows, KH, KW, SW>(g, w, bias, y, res, M, oh, act);
  for (; oh < oh1; oh += rowsPerVec) channels<1, kTwoRows, KH, KW, SW>(g, w, bias, y, res, M, oh, act);
}

bool cpu_has_avx512f() {
  static const bool has = use_avx512f();
  return has;
}

// One input row (W floats) as the even and odd columns of its zero-bordered row (pl zeros on
// the left, Wp in all). Masked loads straight from x: lanes outside the row read as zero
// and never touch memory (a staging copy of the row measured 3x slower: its 64-byte loads
// cannot be forwarded from the narrower stores that filled it).
__attribute__((target("avx512f"))) void split_row(const float* x, int64_t W, int64_t pl, int64_t Wp, float* even,
                                                  float* odd) {
  const int64_t we = (Wp + 1) / 2, wo = Wp / 2;
  for (int64_t q = 0; 2 * q < Wp; q += 16) {
    const int64_t s0 = 2 * q - pl;
    const __m512 a = simd::load_in_row(x, s0, W), b = simd::load_in_row(x, s0 + 16, W);
    const int64_t ne = std::min<int64_t>(16, we - q), no = std::min<int64_t>(16, wo - q);
    const __m512 ev = simd::even_lanes(a, b), od = simd::odd_lanes(a, b);
    if (ne == 16) _mm512_storeu_ps(even + q, ev);
    else _mm512_mask_storeu_ps(even + q, __mmask16((1u << ne) - 1), ev);
    if (no == 16) _mm512_storeu_ps(odd + q, od);
    else if (no > 0) _mm512_mask_storeu_ps(odd + q, __mmask16((1u << no) - 1), od);
  }
}

// split_row for W a multiple of 16 (<= 256) and pl < 16: whole-vector loads of the row, the
// left border shifted in by a two-source permute (the masked loads of split_row cost 3x more).
__attribute__((target("avx512f"))) void split_row16(const float* x, int64_t W, int64_t pl, int64_t Wp, float* even,
                                                    float* odd) {
  const __m512i shift = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(int(16 - pl)));
  const int64_t nx = W / 16, we = (Wp + 1) / 2, wo = Wp / 2;
  const __m512 z = _mm512_setzero_ps();
  for (int64_t q = 0; 2 * q < Wp; q += 16) {
    // padded vectors k, k+1 = lanes 16k.. of the zero-bordered row, from input vectors k-1..k+1
    const int64_t k = q / 8;
    const __m512 x0 = k >= 1 && k - 1 < nx ? _mm512_loadu_ps(x + 16 * (k - 1)) : z;
    const __m512 x1 = k < nx ? _mm512_loadu_ps(x + 16 * k) : z;
    const __m512 x2 = k + 1 < nx ? _mm512_loadu_ps(x + 16 * (k + 1)) : z;
    const __m512 a = _mm512_permutex2var_ps(x0, shift, x1), b = _mm512_permutex2var_ps(x1, shift, x2);
    const int64_t ne = std::min<int64_t>(16, we - q), no = std::min<int64_t>(16, wo - q);
    const __m512 ev = simd::even_lanes(a, b), od = simd::odd_lanes(a, b);
    if (ne == 16) _mm512_storeu_ps(even + q, ev);
    else _mm512_mask_storeu_ps(even + q, __mmask16((1u << ne) - 1), ev);
    if (no == 16) _mm512_storeu_ps(odd + q, od);
    else if (no > 0) _mm512_mask_storeu_ps(odd + q, __mmask16((1u << no) - 1), od);
  }
}

}  // namespace

int64_t conv_direct_floats(int64_t C, int64_t Hp, int64_t Wp, int64_t sw, int64_t kw, int64_t dw) {
  return (sw == 2 ? C * 2 * Hp * ((Wp + 1) / 2) : C * Hp * Wp) + conv_direct_slack(kw, dw);
}

void conv_direct_fill(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp,
                      int64_t Wp, int64_t sw, int64_t kw, int64_t dw, float* pad) {
  conv_direct_fill_rows(x, C, H, W, pt, pl, Hp, Wp, sw, kw, dw, pad, 0, Hp);
}

namespace {
// Rows [r0, r1) of the padded plane of C channels; the slack after the last plane zeroed when
// `slack` (by the one caller that owns the last plane's end).
void fill_rows(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp, int64_t Wp,
               int64_t sw, int64_t kw, int64_t dw, float* pad, int64_t r0, int64_t r1, bool slack) {
  // Rows [r0, r1) of the padded plane: border rows zero, row pt + h from input row h.
  const int64_t top = std::min(r1, pt), in0 = std::max(r0, pt), in1 = std::min(r1, pt + H), bot = std::max(r0, pt + H);
  if (sw != 2) {
    const int64_t plane = Hp * Wp;
    for (int64_t ch = 0; ch < C; ++ch) {
      const float* src = x + ch * H * W;
      float* dst = pad + ch * plane;
      if (r0 < top) std::memset(dst + r0 * Wp, 0, sizeof(float) * (top - r0) * Wp);
      for (int64_t r = in0; r < in1; ++r) {
        float* d = dst + r * Wp;
        for (int64_t w_ = 0; w_ < pl; ++w_) d[w_] = 0.f;
        std::memcpy(d + pl, src + (r - pt) * W, sizeof(float) * W);
        for (int64_t w_ = pl + W; w_ < Wp; ++w_) d[w_] = 0.f;
      }
      if (bot < r1) std::memset(dst + bot * Wp, 0, sizeof(float) * (r1 - bot) * Wp);
    }
    if (slack) std::memset(pad + C * plane, 0, sizeof(float) * conv_direct_slack(kw, dw));
    return;
  }
  const int64_t Wh = (Wp + 1) / 2, half = Hp * Wh, plane = 2 * half;
  for (int64_t ch = 0; ch < C; ++ch) {
    float* dst = pad + ch * plane;
    for (int64_t p = 0; p < 2; ++p) {  // border rows of both planes, and the odd plane's last column
      if (r0 < top) std::memset(dst + p * half + r0 * Wh, 0, sizeof(float) * (top - r0) * Wh);
      if (bot < r1) std::memset(dst + p * half + bot * Wh, 0, sizeof(float) * (r1 - bot) * Wh);
      if (Wp % 2) for (int64_t r = in0; r < in1; ++r) dst[half + r * Wh + Wh - 1] = 0.f;
    }
    const float* src = x + ch * H * W;  // row r of the padded plane is input row r - pt
    if (W % 16 == 0 && pl < 16)
      for (int64_t r = in0; r < in1; ++r) split_row16(src + (r - pt) * W, W, pl, Wp, dst + r * Wh, dst + half + r * Wh);
    else
      for (int64_t r = in0; r < in1; ++r) split_row(src + (r - pt) * W, W, pl, Wp, dst + r * Wh, dst + half + r * Wh);
  }
  if (slack) std::memset(pad + C * plane, 0, sizeof(float) * conv_direct_slack(kw, dw));
}
}  // namespace

void conv_direct_fill_rows(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp,
                           int64_t Wp, int64_t sw, int64_t kw, int64_t dw, float* pad, int64_t r0, int64_t r1) {
  fill_rows(x, C, H, W, pt, pl, Hp, Wp, sw, kw, dw, pad, r0, r1, r1 == Hp);
}

void conv_direct_fill_channels(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp,
                               int64_t Wp, int64_t sw, int64_t kw, int64_t dw, float* pad, int64_t c0, int64_t c1) {
  const int64_t plane = sw == 2 ? 2 * Hp * ((Wp + 1) / 2) : Hp * Wp;
  fill_rows(x + c0 * H * W, c1 - c0, H, W, pt, pl, Hp, Wp, sw, kw, dw, pad + c0 * plane, 0, Hp, c1 == C);
}

bool conv_direct_supported(int64_t OH, int64_t OW, int64_t sw) {
  if (!cpu_has_avx512f() || OW <= 0 || OH <= 0 || (sw != 1 && sw != 2)) return false;
  if (OW % 16 == 0 || (OW == 8 && OH % 2 == 0)) return true;
  // Other widths: a partial last vector a row. Measured against the padded-grid sgemm on
  // 224-px CNN maps (56, 28, 14 wide): see docs/native-cpu.md. MEMLANE_CONV_DIRECT_TAIL=0 turns it off.
  static const bool tails = [] {
    const char* e = std::getenv("MEMLANE_CONV_DIRECT_TAIL");
    return !(e && *e == '0');
  }();
  return tails && OW >= kDirectTailMinWidth;
}

int64_t conv_direct_row_step(int64_t OW) { return OW == 8 ? 4 : 2; }

void conv_direct(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
                 int64_t sh, int64_t sw, int64_t dh, int64_t dw, const float* bias, float* y, int64_t M, int64_t OH,
                 int64_t OW, const ConvAct& act, const float* res) {
  conv_direct_rows(pad, C, Hp, Wp, w, kh, kw, sh, sw, dh, dw, bias, y, M, OH, OW, act, res, 0, OH);
}

void conv_direct_rows(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
                      int64_t sh, int64_t sw, int64_t dh, int64_t dw, const float* bias, float* y, int64_t M,
                      int64_t OH, int64_t OW, const ConvAct& act, const float* res, int64_t oh0, int64_t oh1) {
  const int64_t Wh = (Wp + 1) / 2;
  const Geo g = sw == 2 ? Geo{pad, C, Hp, Wh, kh, kw, dh, dw, sh, C * kh * kw, OH, OW, 2 * Hp * Wh, Hp * Wh}
                        : Geo{pad, C, Hp, Wp, kh, kw, dh, dw, sh, C * kh * kw, OH, OW, Hp * Wp, 0};
  const bool k3 = kh == 3 && kw == 3, wide = OW != 8;  // 8-wide maps: pairs of rows a vector
  if (sw == 1) {
    if (wide) k3 ? run_all<false, 3, 3, 1>(g, w, bias, y, res, M, act, oh0, oh1) : run_all<false, 0, 0, 1>(g, w, bias, y, res, M, act, oh0, oh1);
    else k3 ? run_all<true, 3, 3, 1>(g, w, bias, y, res, M, act, oh0, oh1) : run_all<true, 0, 0, 1>(g, w, bias, y, res, M, act, oh0, oh1);
  } else {
    // 7x7 stride 2 (ResNet's stem): taps unrolled as for 3x3
    if (wide && kh == 7 && kw == 7) run_all<false, 7, 7, 2>(g, w, bias, y, res, M, act, oh0, oh1);
    else if (wide) k3 ? run_all<false, 3, 3, 2>(g, w, bias, y, res, M, act, oh0, oh1) : run_all<false, 0, 0, 2>(g, w, bias, y, res, M, act, oh0, oh1);
    else k3 ? run_all<true, 3, 3, 2>(g, w, bias, y, res, M, act, oh0, oh1) : run_all<true, 0, 0, 2>(g, w, bias, y, res, M, act, oh0, oh1);
  }
}

#else

bool conv_direct_supported(int64_t, int64_t, int64_t) { return false; }
int64_t conv_direct_floats(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) { return 0; }
void conv_direct_fill(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                      int64_t, float*) {}
void conv_direct_fill_rows(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, float*, int64_t, int64_t) {}
void conv_direct_fill_channels(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t, int64_t, float*, int64_t, int64_t) {}
int64_t conv_direct_row_step(int64_t) { return 2; }
void conv_direct_rows(const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t,
                      int64_t, int64_t, const float*, float*, int64_t, int64_t, int64_t, const ConvAct&, const float*,
                      int64_t, int64_t) {}
void conv_direct(const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, const float*, float*, int64_t, int64_t, int64_t, const ConvAct&, const float*) {}

#endif

}  // namespace memlane::cpu
