// MaxPool and AveragePool (2-D, NCHW, pads, strides, dilations for max, ceil mode via the
// plan's output shape, countIncludePad as ONNX Runtime counts it) and GlobalAveragePool.
#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <vector>

#include "cpu/kernel.h"
#include "cpu/simd/avx512.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#define MEMLANE_POOL_AVX2 1
#endif

namespace memlane::cpu {
namespace {

// A 3-wide, stride-2 max pool of one H x W plane, rows first (simd::max3_stride2_pool's 8-lane
// counterpart for CPUs without AVX-512, where max_separable's scalar column pass and its
// scratch plane took ResNet-18's 3x3/2 pool 0.4 ms against ORT's 0.22): for each output row,
// the max over its window's rows (inside the map) of 4 vectors of the input row, whose even /
// odd lanes give 8 outputs' taps 0, 1 and 2; the outputs whose taps reach past either edge of
// the row one at a time. Columns outside [0, W) count as -FLT_MAX; the same floats as the other
// paths but for NaN (the order of the taps: max_separable's note).
void max3_stride2_plane(const float* x, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t sh,
                        int64_t dh, int64_t pt, int64_t pl, float* y) {
  const float* few[16];
  std::vector<const float*> many;  // (windows of more than 16 rows)
  const float** rows = kh <= 16 ? few : (many.resize(size_t(kh)), many.data());
  const int64_t lo = std::min(OW, (pl + 1) / 2);  // first ow whose taps start inside the row
  for (int64_t oh = 0; oh < OH; ++oh) {
    int64_t n = 0;
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t ih = oh * sh - pt + i * dh;
      if (ih >= 0 && ih < H) rows[n++] = x + ih * W;
    }
    float* yr = y + oh * OW;
    const auto one = [&](int64_t ow) {
      float m = -FLT_MAX;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t iw = 2 * ow - pl + j;
          if (iw >= 0 && iw < W) m = std::max(m, rows[r][iw]);
        }
      return m;
    };
    int64_t ow = 0;
    for (; ow < lo; ++ow) yr[ow] = one(ow);
#ifdef MEMLANE_POOL_AVX2
    const auto evens = [](__m256 a, __m256 b) {  // lanes 0, 2, .. 14 of a:b, in order
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                                                    _MM_SHUFFLE(3, 1, 2, 0)));
    };
    const auto odds = [](__m256 a, __m256 b) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))),
                                                    _MM_SHUFFLE(3, 1, 2, 0)));
    };
    if (n > 0)
      for (; ow + 8 <= OW && 2 * ow - pl + 18 <= W; ow += 8) {  // taps 2ow - pl .. 2ow - pl + 16, loads to + 17
        const int64_t s0 = 2 * ow - pl;
        __m256 a = _mm256_loadu_ps(rows[0] + s0), b = _mm256_loadu_ps(rows[0] + s0 + 8);
        __m256 a2 = _mm256_loadu_ps(rows[0] + s0 + 2), b2 = _mm256_loadu_ps(rows[0] + s0 + 10);
        for (int64_t r = 1; r < n; ++r) {
          const float* q = rows[r] + s0;
          a = _mm256_max_ps(a, _mm256_loadu_ps(q));
          b = _mm256_max_ps(b, _mm256_loadu_ps(q + 8));
          a2 = _mm256_max_ps(a2, _mm256_loadu_ps(q + 2));
          b2 = _mm256_max_ps(b2, _mm256_loadu_ps(q + 10));
        }
        _mm256_storeu_ps(yr + ow, _mm256_max_ps(_mm256_max_ps(evens(a, b), odds(a, b)), evens(a2, b2)));
      }
#endif
    for (; ow < OW; ++ow) yr[ow] = one(ow);
  }
}

// 2x2 stride-2 windows inside the map (DenseNet's transition AveragePools, 2x2/2 MaxPools):
// y[oh][ow] over x rows 2oh, 2oh + 1, columns 2ow, 2ow + 1. Average: ((a + b) + c) + d, then
// / 4, the generic loop's order and division, so the same floats; max: exact in any order (but
// NaN: max_separable's note). 8 outputs a step from 16 columns of each row (even / odd lanes by
// shuffles), the last OW % 8 one at a time. ORT's 2x2/2 AveragePool on DenseNet-121's
// transitions took 0.23 ms for the three; the scalar loop here 1.24.
template <bool kMax>
void pool2x2_stride2_plane(const float* x, int64_t W, int64_t OH, int64_t OW, float* y) {
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* r0 = x + 2 * oh * W;
    const float* r1 = r0 + W;
    float* yr = y + oh * OW;
    int64_t ow = 0;
#ifdef MEMLANE_POOL_AVX2
    const auto pick = [](__m256 a, __m256 b, int imm) {  // imm: even (0x88) or odd (0xDD) lanes of a:b, in order
      const __m256 t = imm == 0x88 ? _mm256_shuffle_ps(a, b, 0x88) : _mm256_shuffle_ps(a, b, 0xDD);
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
    };
    for (; ow + 8 <= OW; ow += 8) {  // (2 ow + 16 <= 2 OW <= W: the loads stay in the rows)
      const __m256 a0 = _mm256_loadu_ps(r0 + 2 * ow), b0 = _mm256_loadu_ps(r0 + 2 * ow + 8);
      const __m256 a1 = _mm256_loadu_ps(r1 + 2 * ow), b1 = _mm256_loadu_ps(r1 + 2 * ow + 8);
      const __m256 e0 = pick(a0, b0, 0x88), o0 = pick(a0, b0, 0xDD), e1 = pick(a1, b1, 0x88), o1 = pick(a1, b1, 0xDD);
      const __m256 v = kMax ? _mm256_max_ps(_mm256_max_ps(e0, o0), _mm256_max_ps(e1, o1))
                            : _mm256_div_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(e0, o0), e1), o1), _mm256_set1_ps(4.f));
      _mm256_storeu_ps(yr + ow, v);
    }
#endif
    for (; ow < OW; ++ow) {
      const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
      yr[ow] = kMax ? std::max(std::max(a, b), std::max(c, d)) : (((a + b) + c) + d) / 4.f;
    }
  }
}

// A pooling window on one axis (output index o, stride s, leading pad p, kernel k, input n,
// trailing pad pend): the taps inside the input [begin, end), and how many lie inside the
// padded extent (ceil mode's last window may reach past it), ONNX Runtime's countIncludePad count.
struct PoolSpan {
  int64_t begin, end, padded;
};
inline PoolSpan pool_span(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t pend) {
  const int64_t b = o * s - p, e = std::min(b + k, n + pend);
  return {std::max<int64_t>(b, 0), std::min(e, n), e - b};
}

class PoolKernel final : public Kernel {
 public:
  bool is_max = true, include_pad = false;
  bool inside = false;  // no padding and every window inside the input: no bounds checks
  TensorRef x, y;
  int64_t C = 0, H = 0, W = 0, OH = 0, OW = 0, kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0,
          dh = 1, dw = 1;

  bool separable = false;  // pooling in two passes (max_separable, avg_separable), scratch H x OW a thread
  bool avx512 = false;     // separable 3-wide stride-2 rows on simd::max3_stride2
  // 3-wide stride-2 windows (squeezenet's and resnet's 3x3/2 pools): max_rows_first
  bool rows_first = false;
  // avg_separable: each output column's count (its taps in the input, or with countIncludePad
  // in the padded extent); a window's count is its row's times its column's.
  std::vector<float> col_count;
  // avg_same_size (stride 1, output the input's size): 1 / each output's count (0 where it
  // counts no tap), H x W; empty on every other geometry.
  std::vector<float> avg_flat_scale;
  int threads = 1;

  uint64_t workspace_floats(int64_t) const override { return separable && !rows_first ? uint64_t(threads * H * OW) : 0; }

  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t planes = c.batch * C;
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(OH * OW * kh * kw, 1));
    if (separable) {
      const int64_t slots = std::clamp<int64_t>(std::min<int64_t>(threads, c.pool->threads()), 1, (planes + grain - 1) / grain);
      c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s)
          for (int64_t p = planes * s / slots; p < planes * (s + 1) / slots; ++p)
            if (rows_first) max_rows_first(X + p * H * W, Y + p * OH * OW);
            else if (is_max) max_separable(X + p * H * W, Y + p * OH * OW, c.workspace + s * H * OW);
            else avg_separable(X + p * H * W, Y + p * OH * OW, c.workspace + s * H * OW);
      });
      return;
    }
    c.pool->parallel_for(planes, grain, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) plane(X + p * H * W, Y + p * OH * OW);
    });
  }

  // Max pooling in two passes: the max over each window's columns for every input row (the
  // interior columns without bounds checks), then over the window's rows. Max is exact in any
  // order, so for finite and infinite inputs these are the same floats as the one-pass loop,
  // 5-10x faster on 3x3/2 windows. Not with NaN: std::max(a, NaN) is a and std::max(NaN, b) is
  // NaN, so whether a window holding a NaN gives NaN depends on the order of the taps, and the
  // two paths may differ there. ORT 1.x's CPU MaxPool skips NaN taps (max of the others:
  // [1, NaN, 2] and [NaN, 1, 2] both give 2); neither path here matches that on purpose.
  void max_separable(const float* x, float* y, float* hrow) const {
    const int64_t lo = std::min(OW, (pl + sw - 1) / sw);  // first ow whose leftmost tap is inside
    const int64_t last = W - 1 - (kw - 1) * dw + pl;      // ow * sw <= last: rightmost tap inside
    const int64_t hi = last < 0 ? lo : std::clamp<int64_t>(last / sw + 1, lo, OW);
    auto checked = [&](const float* xr, int64_t ow) {
      float m = -FLT_MAX;
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t iw = ow * sw - pl + j * dw;
        if (iw >= 0 && iw < W) m = std::max(m, xr[iw]);
      }
      return m;
    };
    for (int64_t h = 0; h < H; ++h) {
      const float* xr = x + h * W;
      float* __restrict hr = hrow + h * OW;
      for (int64_t ow = 0; ow < lo; ++ow) hr[ow] = checked(xr, ow);
      if (kw == 3 && dw == 1 && sw == 2 && avx512) {
        simd::max3_stride2(xr - pl + lo * 2, hr + lo, hi - lo);
      } else if (kw == 3 && dw == 1) {
        const float* __restrict b = xr - pl;
        for (int64_t ow = lo; ow < hi; ++ow)
          hr[ow] = std::max(std::max(b[ow * sw], b[ow * sw + 1]), b[ow * sw + 2]);
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) {
          const float* b = xr + ow * sw - pl;
          float m = b[0];
          for (int64_t j = 1; j < kw; ++j) m = std::max(m, b[j * dw]);
          hr[ow] = m;
        }
      }
      for (int64_t ow = hi; ow < OW; ++ow) hr[ow] = checked(xr, ow);
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      float* __restrict yr = y + oh * OW;
      for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = -FLT_MAX;
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t ih = oh * sh - pt + i * dh;
        if (ih < 0 || ih >= H) continue;
        const float* __restrict hr = hrow + ih * OW;
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = std::max(yr[ow], hr[ow]);
      }
    }
  }

  // Average pooling in two passes, as max_separable: each input row's sums over the windows'
  // columns (the interior a tap at a time over the row, which vectorizes), then the sums of a
  // window's rows, divided by the window's count. A window's rows and columns clip
  // independently, so both counts (the taps inside the input, or with countIncludePad the
  // taps inside the padded extent, as ONNX Runtime counts) are a row factor times a column
  // factor. Inception's 3x3 stride-1 pad-1 pools went through plane()'s bounds-checked tap
  // loop: inception_v3's nine took 16.5 ms a batch-1 call against ONNX Runtime's 0.85. The
  // sums are rows of column sums, not plane()'s row-major order: equal up to rounding.
  void avg_separable(const float* x, float* y, float* hrow) const {
    if (!avg_flat_scale.empty()) return avg_same_size(x, y, hrow);
    const int64_t lo = std::min(OW, (pl + sw - 1) / sw);             // first ow whose window starts inside
    const int64_t last = W - kw + pl;                                 // ow * sw <= last: window ends inside
    const int64_t hi = last < 0 ? lo : std::clamp<int64_t>(last / sw + 1, lo, OW);
    for (int64_t h = 0; h < H; ++h) {
      const float* xr = x + h * W;
      float* __restrict hr = hrow + h * OW;
      const auto clipped = [&](int64_t ow) {
        const auto c = pool_span(ow, sw, pl, kw, W, pr);
        float t = 0.f;
        for (int64_t iw = c.begin; iw < c.end; ++iw) t += xr[iw];
        return t;
      };
      for (int64_t ow = 0; ow < lo; ++ow) hr[ow] = clipped(ow);
      const float* __restrict b = xr - pl;
      if (sw == 1) {
        for (int64_t ow = lo; ow < hi; ++ow) hr[ow] = b[ow];
        for (int64_t j = 1; j < kw; ++j)
          for (int64_t ow = lo; ow < hi; ++ow) hr[ow] += b[ow + j];
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) {
          float t = b[ow * sw];
          for (int64_t j = 1; j < kw; ++j) t += b[ow * sw + j];
          hr[ow] = t;
        }
      }
      for (int64_t ow = hi; ow < OW; ++ow) hr[ow] = clipped(ow);
    }
    const float* __restrict cc = col_count.data();
    for (int64_t oh = 0; oh < OH; ++oh) {
      const auto r = pool_span(oh, sh, pt, kh, H, pb);
      float* __restrict yr = y + oh * OW;
      for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = 0.f;
      for (int64_t ih = r.begin; ih < r.end; ++ih) {
        const float* __restrict hr = hrow + ih * OW;
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] += hr[ow];
      }
      const float rc = float(include_pad ? r.padded : r.end - r.begin);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const float cnt = rc * cc[ow];
        yr[ow] = cnt > 0.f ? yr[ow] / cnt : 0.f;
      }
    }
  }

  // Same-size average pooling (stride 1, OH x OW = H x W: Inception's and GoogLeNet's 3x3/1
  // pad-1 pools): avg_separable's two passes over the plane as one flat array, not row by row.
  // A flat index's taps are the row's neighbours except in each row's first pl and last pr
  // columns (and the plane's first and last rows), which are then summed again clipped. On
  // 35x35, 17x17 and 8x8 planes the per-row loops, edges and divisions cost more than the
  // sums: inception_v3's nine pools took 6.7 ms that way at batch 1 (ONNX Runtime 0.9).
  void avg_same_size(const float* x, float* y, float* hrow) const {
    const int64_t n = H * W, pr_w = kw - 1 - pl, pb_h = kh - 1 - pt;
    // rows: every tap of flat index i lies in [0, n) for i in [pl, n - pr_w)
    float* __restrict hr = hrow;
    const float* __restrict b = x - pl;
    for (int64_t i = pl; i < n - pr_w; ++i) hr[i] = b[i];
    for (int64_t j = 1; j < kw; ++j)
      for (int64_t i = pl; i < n - pr_w; ++i) hr[i] += b[i + j];
    for (int64_t h = 0; h < H; ++h) {  // each row's edge columns, clipped to the row
      const float* xr = x + h * W;
      const auto clipped = [&](int64_t ow) {
        const PoolSpan c = pool_span(ow, 1, pl, kw, W, pr);
        float t = 0.f;
        for (int64_t iw = c.begin; iw < c.end; ++iw) t += xr[iw];
        return t;
      };
      for (int64_t ow = 0; ow < std::min(pl, W); ++ow) hr[h * W + ow] = clipped(ow);
      for (int64_t ow = std::max<int64_t>(W - pr_w, 0); ow < W; ++ow) hr[h * W + ow] = clipped(ow);
    }
    // columns: output rows [pt, H - pb_h) have every window row inside, as one flat block
    float* __restrict yf = y;
    const int64_t r0 = std::min(pt, H), r1 = std::max(r0, H - pb_h);
    for (int64_t i = r0 * W; i < r1 * W; ++i) yf[i] = hr[i - pt * W];
    for (int64_t t = 1; t < kh; ++t)
      for (int64_t i = r0 * W; i < r1 * W; ++i) yf[i] += hr[i + (t - pt) * W];
    for (int64_t oh = 0; oh < H; ++oh) {  // the first pt and last pb_h rows, clipped
      if (oh >= r0 && oh < r1) continue;
      const PoolSpan r = pool_span(oh, 1, pt, kh, H, pb);
      float* __restrict yr = y + oh * W;
      for (int64_t ow = 0; ow < W; ++ow) yr[ow] = 0.f;
      for (int64_t ih = r.begin; ih < r.end; ++ih)
        for (int64_t ow = 0; ow < W; ++ow) yr[ow] += hr[ih * W + ow];
    }
    const float* __restrict scale = avg_flat_scale.data();
    for (int64_t i = 0; i < n; ++i) yf[i] *= scale[i];
  }

  // 3-wide stride-2 windows, the rows first: for each output row, the max over its window's
  // input rows (inside the map) then over the columns, in registers
  // (simd::max3_stride2_pool), one pass over the input with no scratch, where max_separable
  // wrote and re-read an H x OW plane. squeezenet1_1's three 3x3/2 pools (64 x 111², 128 x 55²,
  // 256 x 27²): docs/native-cpu.md. The same floats as the other paths but for NaN (the order
  // of the taps).
  void max_rows_first(const float* x, float* y) const {
    if (avx512) simd::max3_stride2_pool(x, H, W, OH, OW, kh, sh, dh, pt, pl, y);
    else max3_stride2_plane(x, H, W, OH, OW, kh, sh, dh, pt, pl, y);
  }

  void plane(const float* x, float* y) const {
    if (inside && kh == 2 && kw == 2 && sh == 2 && sw == 2 && dh == 1 && dw == 1) {  // the common 2x2/2
      if (is_max) pool2x2_stride2_plane<true>(x, W, OH, OW, y);
      else pool2x2_stride2_plane<false>(x, W, OH, OW, y);
      return;
    }
    if (is_max && inside) {
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const float* w0 = x + oh * sh * W + ow * sw;
          float m = w0[0];
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) m = std::max(m, w0[i * dh * W + j * dw]);
          y[oh * OW + ow] = m;
        }
      return;
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t hs = oh * sh - pt;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t ws = ow * sw - pl;
        if (is_max) {
          float m = -FLT_MAX;
          for (int64_t i = 0; i < kh; ++i) {
            const int64_t ih = hs + i * dh;
            if (ih < 0 || ih >= H) continue;
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t iw = ws + j * dw;
              if (iw < 0 || iw >= W) continue;
              m = std::max(m, x[ih * W + iw]);
            }
          }
          y[oh * OW + ow] = m;
        } else {
          const int64_t he = std::min(hs + kh, H + pb), we = std::min(ws + kw, W + pr);
          const int64_t padded = (he - hs) * (we - ws);
          const int64_t h0 = std::max<int64_t>(hs, 0), w0 = std::max<int64_t>(ws, 0);
          const int64_t h1 = std::min(he, H), w1 = std::min(we, W);
          float s = 0.f;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) s += x[ih * W + iw];
          const int64_t cnt = include_pad ? padded : (h1 - h0) * (w1 - w0);
          y[oh * OW + ow] = cnt > 0 ? s / float(cnt) : 0.f;
        }
      }
    }
  }
};

class GlobalAvgKernel final : public Kernel {
 public:
  TensorRef x, y;
  int64_t C = 0, HW = 0;
  bool avx512 = false;
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const float inv = 1.f / float(HW);
    c.pool->parallel_for(c.batch * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(HW, 1)), [&](int64_t b, int64_t e) {
      // (the loop below: one 16-float sum a plane whose serial reduction cost as much as the
      // adds on SE blocks' 7x7-14x14 maps)
      if (avx512) return simd::row_means(X + b * HW, e - b, HW, inv, Y + b);
      for (int64_t p = b; p < e; ++p) {
        const float* xp = X + p * HW;
        // 16 running sums (one vector's lanes) instead of one serial chain of adds
        float acc[16] = {};
        int64_t i = 0;
        for (; i + 16 <= HW; i += 16)
          for (int k = 0; k < 16; ++k) acc[k] += xp[i + k];
        float s = 0.f;
        for (int k = 0; k < 16; ++k) s += acc[k];
        for (; i < HW; ++i) s += xp[i];
        Y[p] = s * inv;
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_pool(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight() || X.shape.size() != 4 || Y.shape.size() != 4 || X.shape[1] != Y.shape[1])
    return unsupported(op, "only 2-D pooling over an activation [n,C,H,W] is supported; X " + shape_str(X.shape) +
                               ", Y " + shape_str(Y.shape), st, msg);
  const OpAttrs& a = op.attrs;
  auto k = std::make_unique<PoolKernel>();
  k->is_max = op.type == OpType::kMaxPool;
  k->include_pad = a.countIncludePad;
  k->C = X.shape[1];
  k->H = X.shape[2];
  k->W = X.shape[3];
  k->OH = Y.shape[2];
  k->OW = Y.shape[3];
  k->kh = a.kernel[0];
  k->kw = a.kernel[1];
  k->sh = a.strides[0];
  k->sw = a.strides[1];
  k->pt = a.pads[0];
  k->pl = a.pads[1];
  k->pb = a.pads[2];
  k->pr = a.pads[3];
  k->dh = k->is_max ? a.dilations[0] : 1;
  k->dw = k->is_max ? a.dilations[1] : 1;
  if (k->kh < 1 || k->kw < 1 || k->sh < 1 || k->sw < 1 || k->dh < 1 || k->dw < 1)
    return unsupported(op, "kernel, strides and dilations must be >= 1", st, msg);
  // Output size as ONNX computes it, floor or ceil; with ceil the last window must start
  // inside the input or its left/top pad (as ONNX Runtime and PyTorch drop it otherwise).
  auto out = [&](int64_t in, int64_t k_, int64_t s, int64_t p0, int64_t p1, int64_t d) {
    const int64_t span = in + p0 + p1 - (d * (k_ - 1) + 1);
    int64_t o = (a.ceilMode ? (span + s - 1) / s : span / s) + 1;
    if (a.ceilMode && (o - 1) * s >= in + p0) --o;
    return o;
  };
  const int64_t eoh = out(k->H, k->kh, k->sh, k->pt, k->pb, k->dh);
  const int64_t eow = out(k->W, k->kw, k->sw, k->pl, k->pr, k->dw);
  if (eoh != k->OH || eow != k->OW)
    return unsupported(op, "output shape " + shape_str(Y.shape) + " differs from the computed [-1," +
                               std::to_string(k->C) + "," + std::to_string(eoh) + "," + std::to_string(eow) + "]", st, msg);
  k->inside = k->pt == 0 && k->pl == 0 && (k->OH - 1) * k->sh + (k->kh - 1) * k->dh < k->H &&
              (k->OW - 1) * k->sw + (k->kw - 1) * k->dw < k->W;
  // MEMLANE_POOL_NO_SEPARABLE=1 keeps max pooling on the one-pass loop (ctest runs both).
  k->separable = !(k->inside && k->kh == 2 && k->kw == 2 && k->sh == 2 && k->sw == 2 && k->dh == 1 && k->dw == 1) &&
                 std::getenv("MEMLANE_POOL_NO_SEPARABLE") == nullptr;
  k->avx512 = simd::have_avx512();
  // MEMLANE_POOL_NO_ROWS_FIRST=1 keeps them on max_separable (A/B timing; ctest runs both).
  // (AVX-512's kernel, or the 8-lane one without it: max3_stride2_plane)
  k->rows_first = k->separable && k->is_max && k->kw == 3 && k->dw == 1 && k->sw == 2 &&
                  std::getenv("MEMLANE_POOL_NO_ROWS_FIRST") == nullptr;
  if (k->separable && !k->is_max) {
    for (int64_t ow = 0; ow < k->OW; ++ow) {
      const PoolSpan c = pool_span(ow, k->sw, k->pl, k->kw, k->W, k->pr);
      k->col_count.push_back(float(k->include_pad ? c.padded : c.end - c.begin));
    }
    // MEMLANE_POOL_NO_FLAT=1 keeps same-size pools on the row-by-row passes (A/B; ctest runs both)
    if (k->sh == 1 && k->sw == 1 && k->OH == k->H && k->OW == k->W && k->pt < k->kh && k->pl < k->kw &&
        std::getenv("MEMLANE_POOL_NO_FLAT") == nullptr)
      for (int64_t oh = 0; oh < k->OH; ++oh) {
        const PoolSpan r = pool_span(oh, 1, k->pt, k->kh, k->H, k->pb);
        const float rc = float(k->include_pad ? r.padded : r.end - r.begin);
        for (int64_t ow = 0; ow < k->OW; ++ow) {
          const float cnt = rc * k->col_count[size_t(ow)];
          k->avg_flat_scale.push_back(cnt > 0.f ? 1.f / cnt : 0.f);
        }
      }
  }
  k->threads = std::max(1, bc.threads);
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

std::unique_ptr<Kernel> make_global_avg_pool(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight() || X.shape.size() < 3 || Y.elements() != X.shape[1])
    return unsupported(op, "expects X [n,C,…] and Y [n,C,1,…]; X " + shape_str(X.shape) + ", Y " + shape_str(Y.shape), st, msg);
  auto k = std::make_unique<GlobalAvgKernel>();
  k->C = X.shape[1];
  k->HW = X.elements() / std::max<int64_t>(k->C, 1);
  k->avx512 = simd::have_avx512();
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
