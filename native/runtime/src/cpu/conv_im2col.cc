// ConvKernel's sgemm-on-columns paths (conv_kernel.h): the padded-width grid (stride 1) and
// the bounds-checked im2col (the rest), and run_product, which picks the non-pointwise path.
// Small images are batched: the columns of several samples go into one sgemm
// (one call per chunk instead of per sample, which is what dominates at 8x8 inputs).
#include <algorithm>
#include <cstring>

#include "cpu/conv_kernel.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/simd/avx512.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#define MEMLANE_IM2COL_AVX2 1
#endif

namespace memlane::cpu::conv_detail {
namespace {

// r[ow] = xr[2 * ow] for ow in [lo, hi), where xr[0 .. avail) may be read: 16 inputs a step
// (the even lanes of two vectors) while they lie within avail, then one by one. The stems'
// stride-2 columns (27 rows of 12544 for a 3x3 stem at 224 px) were a scalar strided copy.
inline void copy_stride2(const float* __restrict xr, float* __restrict r, int64_t lo, int64_t hi, int64_t avail) {
  int64_t ow = lo;
#ifdef MEMLANE_IM2COL_AVX2
  for (; ow + 8 <= hi && 2 * ow + 16 <= avail; ow += 8) {
    const __m256 a = _mm256_loadu_ps(xr + 2 * ow), c = _mm256_loadu_ps(xr + 2 * ow + 8);
    // [a0 a2 c0 c2 | a4 a6 c4 c6] -> [a0 a2 a4 a6 c0 c2 c4 c6]
    _mm256_storeu_ps(r + ow, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0x88)), 0xD8)));
  }
#else
  (void)avail;
#endif
  for (; ow < hi; ++ow) r[ow] = xr[2 * ow];
}

// Columns of one sample and one group: col[(c*kh+i)*kw+j][p - col0], row stride ld, for the
// output rows [oh0, oh1) (p = oh * OW + ow; col0 = oh0 * OW: a compact block of those rows).
// The valid output-column range of each kernel tap is computed once, so the inner loops are
// plain (vectorisable) copies; memcpy calls cost more than the copy on 4- to 16-wide rows.
void im2col(const ConvGeom& g, const float* x, float* col, int64_t ld, int64_t oh0, int64_t oh1, int64_t col0 = 0) {
  const int64_t OW = g.OW, H = g.H, W = g.W, sw = g.sw;
  for (int64_t c = 0; c < g.Cg(); ++c) {
    const float* xc = x + c * H * W;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        const int64_t woff = j * g.dw - g.pl;
        // ow range whose input column lies inside [0, W)
        int64_t lo = woff >= 0 ? 0 : (-woff + sw - 1) / sw;
        int64_t hi = W - woff > 0 ? (W - woff + sw - 1) / sw : 0;
        lo = std::min(lo, OW);
        hi = std::clamp(hi, lo, OW);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          float* __restrict r = row + (oh * OW - col0);
          const int64_t ih = oh * g.sh - g.pt + i * g.dh;
          if (ih < 0 || ih >= H) {
            for (int64_t ow = 0; ow < OW; ++ow) r[ow] = 0.f;
            continue;
          }
          const float* __restrict xr = xc + ih * W + woff;
          for (int64_t ow = 0; ow < lo; ++ow) r[ow] = 0.f;
          if (sw == 1)
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow];
          else if (sw == 2)
            copy_stride2(xr, r, lo, hi, W - woff);
          else
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * sw];
          for (int64_t ow = hi; ow < OW; ++ow) r[ow] = 0.f;
        }
      }
    }
  }
}

}  // namespace

void ConvKernel::run_padded(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), K = g.K(), Cg = g.Cg(), Mg = g.Mg();
  const int64_t pl = plane(), P = Pp();
  const int64_t s = g.group == 1 ? padded_chunk(c.batch) : 1;
  float* pad = c.workspace;
  float* col = pad + s * Cg * pl + slack();
  for (int64_t n0 = 0; n0 < c.batch; n0 += s) {
    const int64_t cnt = std::min(s, c.batch - n0), ld = cnt * P;
    float* prod = col + K * ld;
    for (int64_t gi = 0; gi < g.group; ++gi) {
      // 1. zero-bordered copy of each sample's group channels
      for (int64_t k = 0; k < cnt; ++k)
        for (int64_t ch = 0; ch < Cg; ++ch) {
          const float* src = X + (n0 + k) * in_sz + (gi * Cg + ch) * g.H * g.W;
          float* dst = pad + (k * Cg + ch) * pl;
          std::memset(dst, 0, sizeof(float) * g.pt * Wp);
          for (int64_t h = 0; h < g.H; ++h) {
            float* d = dst + (g.pt + h) * Wp;
            for (int64_t w = 0; w < g.pl; ++w) d[w] = 0.f;
            std::memcpy(d + g.pl, src + h * g.W, sizeof(float) * g.W);
            for (int64_t w = g.pl + g.W; w < Wp; ++w) d[w] = 0.f;
          }
          std::memset(dst + (g.pt + g.H) * Wp, 0, sizeof(float) * pb * Wp);
        }
      std::memset(pad + cnt * Cg * pl, 0, sizeof(float) * slack());
      // 2. columns: one contiguous run per (tap, sample)
      for (int64_t ch = 0; ch < Cg; ++ch)
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            float* row = col + ((ch * g.kh + i) * g.kw + j) * ld;
            const int64_t off = i * g.dh * Wp + j * g.dw;
            for (int64_t k = 0; k < cnt; ++k)
              std::memcpy(row + k * P, pad + (k * Cg + ch) * pl + off, sizeof(float) * P);
          }
      // 3. product on the padded grid
      sgemm_pool(c.pool, false, Mg, ld, K, 1.f, w + gi * Mg * K, K, col, ld, 0.f, prod, ld);
      // 4. drop the extra columns, add the bias, activate
      for (int64_t k = 0; k < cnt; ++k)
        for (int64_t m = 0; m < Mg; ++m) {
          const float bm = b ? b[gi * Mg + m] : 0.f;
          float* __restrict yr = Y + (n0 + k) * out_sz + (gi * Mg + m) * g.P();
          const float* __restrict pr_ = prod + m * ld + k * P;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const float* src = pr_ + oh * Wp;
            float* dst = yr + oh * g.OW;
            if (relu)
              for (int64_t ow = 0; ow < g.OW; ++ow) { const float v = src[ow] + bm; dst[ow] = v > 0.f ? v : 0.f; }
            else
              for (int64_t ow = 0; ow < g.OW; ++ow) dst[ow] = src[ow] + bm;
          }
        }
    }
  }
}

// True when the folded activation (act) was applied too.
bool ConvKernel::run_product(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), P = g.P();
  if (winograd) return run_winograd(c), false;
  if (winograd_avx2) return run_winograd_avx2(c), true;
  if (direct) return run_direct(c, folded_act()), true;
  if (flat) return run_flat(c), false;
  if (pixel_rows) return run_pixel_rows(c), true;
  if (padded) return run_padded(c), false;
  const int64_t K = g.K();
  const int64_t s = g.group == 1 ? chunk(c.batch) : 1;
  if (s > 1) {
    float* col = c.workspace;
    float* prod = c.workspace + K * P * s;
    for (int64_t n0 = 0; n0 < c.batch; n0 += s) {
      const int64_t cnt = std::min(s, c.batch - n0), ld = cnt * P;
      for (int64_t k = 0; k < cnt; ++k) im2col(g, X + (n0 + k) * in_sz, col + k * P, ld, 0, g.OH);
      sgemm_pool(c.pool, false, g.M, ld, K, 1.f, w, K, col, ld, 0.f, prod, ld);
      for (int64_t k = 0; k < cnt; ++k) bias_act(Y + (n0 + k) * out_sz, prod + k * P, ld, b, g.M, P, relu);
    }
    return false;
  }
  const int64_t Mg = g.Mg(), Cg = g.Cg();
  // Threads split each group's output rows: each builds its rows' columns, multiplies them
  // (single-threaded sgemm) and applies bias and activation, with no serial pass between.
  const int64_t grain = std::max<int64_t>(1, kMinConvMacsPerThread / std::max<int64_t>(1, Mg * K * g.OW));
  // Without AVX-512, every product on the AVX2 kernel, bias and activation in registers:
  // OpenBLAS's small-M products (a group's 16-24 channels x 9 taps, stems) ran at a third of its
  // speed, and alone, pinned, min of 30, the AVX2 kernel blocked against OpenBLAS: ResNet-18's
  // strided 3x3 convs 128 x 576 x 784 1313 / 1352 us, 256 x 2304 x 49 643 / 765, its 512 x 4608
  // x 49 3181 / 3715.
  const bool avx2 = !simd::have_avx512() && simd::have_avx2_gemm();
  static const bool split_channels = std::getenv("MEMLANE_IM2COL_SPLIT_ROWS") == nullptr;  // A/B
  const ConvAct fa = folded_act();
  for (int64_t n = 0; n < c.batch; ++n) {
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const float* xg = X + n * in_sz + gi * Cg * g.H * g.W;
      float* yg = Y + n * out_sz + gi * Mg * P;
      const float* bg = b ? b + gi * Mg : nullptr;
      if (avx2 && K > kIm2colBlockMaxK && split_channels) {
        // Big K (weights of up to 9 MiB): the sample's columns first, split by rows, then the
        // product split by output channels in blocks of 24, so each thread streams its share of
        // the weights, not all of them (split by rows, both threads read all 9 MiB, and on a
        // 7x7 map rows split 4 + 3).
        c.pool->parallel_for(g.OH, 1, [&](int64_t oh0, int64_t oh1) { im2col(g, xg, c.workspace, P, oh0, oh1); });
        c.pool->parallel_for((Mg + 23) / 24, 1, [&](int64_t u0, int64_t u1) {
          const int64_t m0 = u0 * 24, m1 = std::min(Mg, u1 * 24);
          simd::sgemm_nn_rows_avx2(m1 - m0, P, K, w + (gi * Mg + m0) * K, K, c.workspace, P, yg + m0 * P, P,
                                   bg ? bg + m0 : nullptr, fa);
        });
        continue;
      }
      c.pool->parallel_for(g.OH, grain, [&](int64_t oh0, int64_t oh1) {
        const int64_t p0 = oh0 * g.OW, pc = (oh1 - oh0) * g.OW;
        if (avx2) {
          // In blocks of rows whose columns (K x rows x OW) stay in L2 while the product reads
          // them, each compact in this chunk's share of the workspace (K x its pixels): the
          // whole chunk's columns at once were 1.7 MiB a group for RegNet's first strided
          // grouped conv (144 x 3136), written out and read back from L3.
          float* buf = c.workspace + K * p0;
          const int64_t rows = K > kIm2colBlockMaxK ? oh1 - oh0
                                                    : std::max<int64_t>(1, kIm2colBlockFloats / std::max<int64_t>(1, K * g.OW));
          for (int64_t b0 = oh0; b0 < oh1; b0 += rows) {
            const int64_t b1 = std::min(oh1, b0 + rows), bc = (b1 - b0) * g.OW;
            im2col(g, xg, buf, bc, b0, b1, b0 * g.OW);
            simd::sgemm_nn_rows_avx2(Mg, bc, K, w + gi * Mg * K, K, buf, bc, yg + b0 * g.OW, P, bg, fa);
          }
          return;
        }
        im2col(g, xg, c.workspace, P, oh0, oh1);
        sgemm_pool(nullptr, false, Mg, pc, K, 1.f, w + gi * Mg * K, K, c.workspace + p0, P, 0.f, yg + p0, P);
        if (bg || relu || act.kind != ConvAct::kNone)
          for (int64_t m = 0; m < Mg; ++m)
            bias_act(yg + m * P + p0, yg + m * P + p0, P, bg ? bg + m : nullptr, 1, pc, relu, act);
      });
    }
  }
  return true;
}

}  // namespace memlane::cpu::conv_detail
