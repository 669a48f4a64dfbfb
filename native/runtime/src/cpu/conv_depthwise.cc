#include "cpu/conv_depthwise.h"
#include "cpu/conv_depthwise_avx2.h"
#include "cpu/conv_depthwise_blocked.h"
#include "cpu/conv_depthwise_s2_avx512.h"
#include "cpu/conv_act_avx512.h"
#include "cpu/cpu_features.h"
#include "cpu/conv_direct.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu/simd/lanes_avx512.h"
#define MEMLANE_DW_AVX512 1
#endif

namespace memlane::cpu {

// Slack past the planes: a 16-wide load at the last output column of a row may run past
// them (its extra lanes are dropped; conv_direct_slack is conv_direct's bound for the same).
int64_t conv_depthwise_scratch(const DwGeom& g) {
  return g.sw * g.Hp() * g.Wq() + std::max<int64_t>(16, conv_direct_slack(g.kw, g.dw));
}

int64_t depthwise_threads(int64_t items, int64_t madds, int64_t threads, int64_t pool_threads) {
  const int64_t slots = std::clamp<int64_t>(std::min(threads, pool_threads), 1, std::max<int64_t>(1, items));
  const int64_t per_slot_min = std::max<int64_t>(1, 20000 / std::max<int64_t>(1, madds));
  return std::clamp<int64_t>(items / per_slot_min, 1, slots);
}

namespace {

#ifdef MEMLANE_DW_AVX512
bool has_avx512f() {
  static const bool has = use_avx512f();
  return has;
}

// Column stride 2: each input row's even and odd elements to their phase rows, 32 floats a
// step with two permutes; only the input's own positions are written (the border is the
// caller's). conv_direct_fill, used before, wrote whole padded rows with a scalar loop on
// widths like 56, and cost more than the taps' FMAs.
__attribute__((target("avx512f"))) void fill_phases_s2(const DwGeom& g, const float* x, float* s) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  // x[2i] lands on padded column pl + 2i: phase pl % 2, index pl / 2 + i; x[2i+1] likewise.
  float* even_base = s + (g.pl % 2) * plane + g.pl / 2;
  float* odd_base = s + ((g.pl + 1) % 2) * plane + (g.pl + 1) / 2;
  for (int64_t h = 0; h < g.H; ++h) {
    const float* xr = x + h * g.W;
    float* er = even_base + (g.pt + h) * Wq;
    float* orow = odd_base + (g.pt + h) * Wq;
    for (int64_t w = 0; w < g.W; w += 32) {
      const int64_t n = std::min<int64_t>(32, g.W - w);
      const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      const __mmask16 m1 = n <= 16 ? __mmask16(0) : n == 32 ? __mmask16(0xFFFF) : __mmask16((1u << (n - 16)) - 1);
      const __m512 a = _mm512_maskz_loadu_ps(m0, xr + w), b = _mm512_maskz_loadu_ps(m1, xr + w + 16);
      const int64_t ne = (n + 1) / 2, no = n / 2;
      const __mmask16 me = ne == 16 ? __mmask16(0xFFFF) : __mmask16((1u << ne) - 1);
      const __mmask16 mo = no == 16 ? __mmask16(0xFFFF) : __mmask16((1u << no) - 1);
      _mm512_mask_storeu_ps(er + w / 2, me, simd::even_lanes(a, b));
      _mm512_mask_storeu_ps(orow + w / 2, mo, simd::odd_lanes(a, b));
    }
  }
}
#endif

#ifdef MEMLANE_DW_AVX2
// MEMLANE_DW_NO_AVX2: the portable loops instead (A/B timing, and their test on x86).
bool use_avx2() {
  static const bool use = std::getenv("MEMLANE_DW_NO_AVX2") == nullptr;
  return use;
}
#endif

// scratch[p][r][q] = padded(x)[r][q*sw + p], zero outside the input. bordered: s holds a
// previous channel's fill of the same geometry (its zero border is still there).
void fill_phases(const DwGeom& g, const float* x, float* s, bool bordered) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  // The copies below never write the border: zeroing the plane again for each channel cost
  // a third of a 112x112 channel's FMAs.
  if (!bordered) std::memset(s, 0, sizeof(float) * size_t(g.sw * plane));
#ifdef MEMLANE_DW_AVX512
  // Column stride 2 with permutes (a strided scalar copy of each row cost more than the whole
  // depthwise product).
  if (g.sw == 2 && has_avx512f()) {
    fill_phases_s2(g, x, s);
    return;
  }
#endif
#ifdef MEMLANE_DW_AVX2
  if (g.sw == 2 && use_avx2()) {  // likewise on AVX2, 16 inputs a step
    dw_fill_phases_s2_avx2(g, x, s);
    return;
  }
  if (g.sw == 1 && use_avx2()) {
    dw_fill_s1_avx2(g, x, s);
    return;
  }
#endif
  for (int64_t h = 0; h < g.H; ++h) {
    const float* xr = x + h * g.W;
    const int64_t r = g.pt + h;
    for (int64_t p = 0; p < g.sw; ++p) {  // input columns w with (pl + w) % sw == p
      float* dst = s + p * plane + r * Wq;
      const int64_t w0 = ((p - g.pl) % g.sw + g.sw) % g.sw;
      for (int64_t w = w0, q = (g.pl + w0) / g.sw; w < g.W; w += g.sw, ++q) dst[q] = xr[w];
    }
  }
}

// conv_depthwise.h's dw_tap_offset (shared with conv_depthwise_avx2.cc)
inline int64_t tap_offset(const DwGeom& g, int64_t plane, int64_t Wq, int64_t i, int64_t j) {
  return dw_tap_offset(g, plane, Wq, i, j);
}

void channel_portable(const DwGeom& g, const float* s, const float* w, float bias, float* y) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    float* __restrict yr = y + oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] = bias;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float wv = w[i * g.kw + j];
        const float* __restrict src = s + tap_offset(g, plane, Wq, i, j) + oh * g.sh * Wq;
        for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] += wv * src[ow];
      }
  }
}

#ifdef MEMLANE_DW_AVX512
// KH/KW > 0 fix the kernel size (3x3 and 5x5 unroll); 0 reads g.
template <int KH, int KW>
__attribute__((target("avx512f"))) void channel_avx512(const DwGeom& g, const float* s, const float* w, float bias,
                                                       float* y, const ConvAct& act) {
  // (Hp and Wq once a channel: recomputing them for each tap cost more than the 7x7 maps' FMAs)
  const int64_t kh = KH > 0 ? KH : g.kh, kw = KW > 0 ? KW : g.kw, Wq = g.Wq(), plane = g.Hp() * Wq;
  constexpr int kMaxTaps = 49;
  int64_t off[kMaxTaps];
  __m512 wv[kMaxTaps];
  const bool cached = kh * kw <= kMaxTaps;
  if (cached)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        off[i * kw + j] = tap_offset(g, plane, Wq, i, j);
        wv[i * kw + j] = _mm512_set1_ps(w[i * kw + j]);
      }
  const __m512 b = _mm512_set1_ps(bias);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* row = s + oh * g.sh * Wq;
    float* yr = y + oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ow += 16) {
      __m512 acc = b;
      if (cached) {
        for (int64_t t = 0; t < kh * kw; ++t) acc = _mm512_fmadd_ps(wv[t], _mm512_loadu_ps(row + off[t] + ow), acc);
      } else {
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(w[i * kw + j]), _mm512_loadu_ps(row + tap_offset(g, plane, Wq, i, j) + ow), acc);
      }
      acc = act_vec16(acc, act);
      const int64_t n = std::min<int64_t>(16, g.OW - ow);
      if (n == 16) _mm512_storeu_ps(yr + ow, acc);
      else _mm512_mask_storeu_ps(yr + ow, __mmask16((1u << n) - 1), acc);
    }
  }
}

// 3x3, row dilation 1: two output rows at once. Their accumulators are independent (one
// 9-FMA chain a vector was latency-bound), and with row stride 1 they share two input rows,
// so each load of those feeds two FMAs (12 loads for two vectors instead of 18; 15 at stride 2).
template <int SH>
__attribute__((target("avx512f"))) void channel_avx512_rows2(const DwGeom& g, const float* s, const float* w,
                                                             float bias, float* y, const ConvAct& act) {
  const int64_t Wq = g.Wq(), plane = g.Hp() * Wq;
  int64_t off[3];
  __m512 wv[9];
  for (int j = 0; j < 3; ++j) off[j] = tap_offset(g, plane, Wq, 0, j);
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 b = _mm512_set1_ps(bias);
  constexpr int kRows = SH + 3;  // input rows two output rows read
  for (int64_t oh = 0; oh < g.OH; oh += 2) {
    const float* row = s + oh * SH * Wq;
    float* y0 = y + oh * g.OW;
    float* y1 = y0 + g.OW;
    const bool pair = oh + 1 < g.OH;  // the last row alone: its partner's loads stay in the plane
    for (int64_t ow = 0; ow < g.OW; ow += 16) {
      __m512 a0 = b, a1 = b;
      for (int r = 0; r < (pair ? kRows : 3); ++r)
        for (int j = 0; j < 3; ++j) {
          const __m512 v = _mm512_loadu_ps(row + r * Wq + off[j] + ow);
          if (r < 3) a0 = _mm512_fmadd_ps(wv[r * 3 + j], v, a0);
          if (r >= SH && r - SH < 3) a1 = _mm512_fmadd_ps(wv[(r - SH) * 3 + j], v, a1);
        }
      const int64_t n = std::min<int64_t>(16, g.OW - ow);
      const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      _mm512_mask_storeu_ps(y0 + ow, m, act_vec16(a0, act));
      if (pair) _mm512_mask_storeu_ps(y1 + ow, m, act_vec16(a1, act));
    }
  }
}
#endif

}  // namespace

void conv_depthwise_channel(const DwGeom& g, const float* x, const float* w, float bias, float* y,
                            const ConvAct& act, float* scratch, bool scratch_bordered) {
  fill_phases(g, x, scratch, scratch_bordered);
#ifdef MEMLANE_DW_AVX512
  if (has_avx512f()) {
    static const bool rows2 = std::getenv("MEMLANE_DW_NO_ROWS2") == nullptr;  // A/B timing
    if (g.kh == 3 && g.kw == 3 && g.dh == 1 && g.sh == 1 && rows2) channel_avx512_rows2<1>(g, scratch, w, bias, y, act);
    else if (g.kh == 3 && g.kw == 3 && g.dh == 1 && g.sh == 2 && rows2) channel_avx512_rows2<2>(g, scratch, w, bias, y, act);
    else if (g.kh == 3 && g.kw == 3) channel_avx512<3, 3>(g, scratch, w, bias, y, act);
    else if (g.kh == 5 && g.kw == 5) channel_avx512<5, 5>(g, scratch, w, bias, y, act);
    else channel_avx512<0, 0>(g, scratch, w, bias, y, act);
    return;  // the activation went in registers (act_vec16)
  }
#endif
#ifdef MEMLANE_DW_AVX2
  if (use_avx2()) {
    dw_channel_avx2(g, scratch, w, bias, y, act);  // the activation in registers (act_vec8)
    return;
  }
#endif
  channel_portable(g, scratch, w, bias, y);
  conv_activate(y, g.OH * g.OW, act);
}

}  // namespace memlane::cpu

namespace memlane::cpu {
namespace {

class DepthwiseKernel final : public Kernel {
 public:
  DwGeom g{};
  int64_t C = 0;
  TensorRef x, y;
  const float* w = nullptr;
  const float* b = nullptr;
  ConvAct act;
  int threads = 1;
  // Every channel through dw_channel_s2_direct, with no phase planes: at stride 2 over a plane
  // larger than L1 their copy cost more than the taps.
  bool s2_direct = false;

  const char* path() const override { return s2_direct ? "depthwise_s2_direct" : "depthwise_per_channel"; }

  // 16-float aligned scratch slots, one a thread; none when no channel is copied.
  int64_t slot_floats() const { return s2_direct ? 0 : (conv_depthwise_scratch(g) + 15) / 16 * 16; }
  uint64_t workspace_floats(int64_t) const override { return uint64_t(threads) * uint64_t(slot_floats()); }

  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t in_sz = g.H * g.W, out_sz = g.OH * g.OW, K = g.kh * g.kw, items = c.batch * C;
    const int64_t slot = slot_floats();
    const int64_t use = depthwise_threads(items, K * out_sz, threads, c.pool->threads());
    c.pool->parallel_for(use, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        float* scratch = c.workspace + s * slot;
        for (int64_t it = items * s / use; it < items * (s + 1) / use; ++it) {
          const int64_t ch = it % C;
          if (s2_direct) dw_channel_s2_direct(g, X + it * in_sz, w + ch * K, b ? b[ch] : 0.f, Y + it * out_sz, act);
          else conv_depthwise_channel(g, X + it * in_sz, w + ch * K, b ? b[ch] : 0.f, Y + it * out_sz, act, scratch,
                                      it > items * s / use);
        }
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_depthwise_kernel(const DwGeom& g, int64_t C, TensorRef x, TensorRef y, const float* w,
                                              const float* bias, const ConvAct& act, int threads) {
  // AVX-512: 16 channels a vector (conv_depthwise_blocked.h); elsewhere one channel at a time.
  if (auto blocked = make_depthwise_blocked_kernel(g, C, x, y, w, bias, act, threads)) return blocked;
  auto k = std::make_unique<DepthwiseKernel>();
  k->g = g;
  k->C = C;
  k->x = x;
  k->y = y;
  k->w = w;
  k->b = bias;
  k->act = act;
  k->threads = std::max(1, threads);
  // Not for y over x (the planner's in-place activation): it reads input rows the output has
  // reached, where the copy holds them. (Same-size planes at stride 2: only tiny maps.)
  k->s2_direct = dw_s2_direct_applies(g) && !(x.weight == nullptr && y.weight == nullptr && x.offset == y.offset);
  return k;
}

}  // namespace memlane::cpu
