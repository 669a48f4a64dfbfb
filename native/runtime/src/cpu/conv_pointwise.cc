// The SIMD pointwise (1x1) conv paths of ConvKernel (conv_kernel.h): the pixels in the lanes
// (simd::sgemm_nn, AVX-512; simd::sgemm_nn_rows_avx2 without it) and the output channels in
// the lanes (simd::pw_lanes, AVX-512), and the gather that puts a strided 1x1 conv's pixels
// in front of them; on either, at batch 1 on several threads, the input channels split
// between the threads (run_pointwise_split_input). make_conv (conv.cc) picks between them and
// OpenBLAS.
#include <algorithm>

#include "cpu/conv_kernel.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/simd/avx512.h"
#include "cpu/simd/pw_lanes.h"
#include "cpu/thread_pool.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu/simd/lanes_avx512.h"
#define MEMLANE_PW_AVX512 1
#endif

namespace memlane::cpu::conv_detail {

namespace {

// y[i] = t[i] + bias + r[i], then max(., 0) when relu; r may be y (each r[i] read before y[i]
// is written).
void residual_act(const float* t, const float* r, float* y, int64_t n, float bias, bool relu) {
  if (relu)
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(t[i] + bias + r[i], 0.f);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = t[i] + bias + r[i];
}

#ifdef MEMLANE_PW_AVX512
// dst[ow] = src[2 * ow] for ow < n, from a row of W floats: the even lanes of two vectors at a
// time while both lie in the row, then one by one.
__attribute__((target("avx512f"))) void even_columns(const float* src, float* dst, int64_t n, int64_t W) {
  int64_t ow = 0;
  for (; ow + 16 <= n && 2 * ow + 32 <= W; ow += 16)
    _mm512_storeu_ps(dst + ow, simd::even_lanes(_mm512_loadu_ps(src + 2 * ow), _mm512_loadu_ps(src + 2 * ow + 16)));
  for (; ow < n; ++ow) dst[ow] = src[2 * ow];
}
#endif

}  // namespace

// The pixels a strided 1x1 conv reads (no pads: pixel (oh, ow) is X's (oh*sh, ow*sw)), packed
// as a stride-1 input [N][C][OH*OW]; at stride 2 two loads and a permute per 16 pixels.
void ConvKernel::gather_strided(const RunCtx& c, float* dst) const {
  const float* X = x.at(c);
  const int64_t H = g.H, W = g.W, OH = g.OH, OW = g.OW, sh = g.sh, sw = g.sw, P = g.P();
#ifdef MEMLANE_PW_AVX512
  const bool vec = sw == 2 && simd::have_avx512();
#endif
  // Chunks of at least 16384 output floats (64 KiB): at 65536, ResNet's 64 -> 128 downsample
  // at 28x28 (200 KiB gathered) ran on one thread while the other waited. Batch 1, 2 threads,
  // alternating runs, the strided 1x1 convs' summed mean time: resnet18 0.91x, regnet_x_400mf
  // 0.95x of that (medians of 8 rounds).
  c.pool->parallel_for(c.batch * g.C, std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* xp = X + i * H * W;
      float* dp = dst + i * P;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float* src = xp + oh * sh * W;
        float* d = dp + oh * OW;
#ifdef MEMLANE_PW_AVX512
        if (vec) {
          even_columns(src, d, OW, W);
          continue;
        }
#endif
        for (int64_t ow = 0; ow < OW; ++ow) d[ow] = src[ow * sw];
      }
    }
  });
}

// Pointwise conv as Y[M x P] = W[M x C] X[C x P] on the register-tiled AVX-512 product: units
// of 8 output rows x 512 columns (W's 8 rows stay in L1 across the 32-column steps). A folded
// SiLU is applied in registers with the bias (sgemm_nn_rows: 0.90-0.94 of the pass after on
// efficientnet_b0's expansions); bias, Relu and Clip in a pass over the block while it is in
// L1 (in registers measured 1.14-1.27x slower on efficientnet's bias-only 16/24-channel
// projections and 1.11-1.16x on mobilenet_v2's Clip expansions, not understood yet). Threads split
// samples x column panels, and the rows too when there are fewer panels than threads. A fused
// residual Add (+ Relu): the block's product goes to a scratch in L1 first, since the residual
// may share Y's bytes (the Add in place), then Y = act(scratch + bias + residual).
void ConvKernel::run_pointwise_simd(const RunCtx& c) const {
  if (const int64_t T = split_input_threads(c)) return run_pointwise_split_input(c, T);
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t P = g.P(), M = g.M, C = g.C, in_sz = C * P, out_sz = M * P;
  const int64_t T = c.pool->threads();
  // Column panels of near-equal width (a multiple of 16, at most kPwCols), as many as make the
  // units a multiple of the threads where there are few: squeezenet1_1's 27x27 maps (729
  // pixels) were panels of 512 and 217, one of 2 threads doing 70 % of the conv. One panel
  // stays one (the threads split its rows below).
  int64_t panels = (P + kPwCols - 1) / kPwCols;
  if (T > 1 && panels > 1 && c.batch * panels < 8 * T)
    while ((c.batch * panels) % T != 0) ++panels;
  const int64_t cols = std::min(kPwCols, ((P + panels - 1) / panels + 15) / 16 * 16);
  panels = (P + cols - 1) / cols;
  const int64_t per_sample = panels;
  const int64_t row_groups = std::clamp<int64_t>(c.batch * panels >= T ? 1 : T, 1, (M + 7) / 8);
  const int64_t rows_per = ((M + row_groups - 1) / row_groups + 7) / 8 * 8;
  const int64_t units = c.batch * per_sample * row_groups;
  const int64_t grain = std::max<int64_t>(1, 400000 / std::max<int64_t>(rows_per * cols * C, 1));
  const ConvAct a = folded_act();
  const float* R = has_res ? res.at(c) : nullptr;
  // Without AVX-512: the AVX2+FMA kernel (simd/avx2_gemm.h; make_conv takes this path only
  // where it exists), which adds the bias, the residual and every activation in registers
  // (mobilenet_v2's 16 -> 96 Clip expansion at 112x112, 1 thread, min of 40: 0.75 ms, against
  // 0.82 ms with the Clip in a pass after and 1.37 ms on OpenBLAS).
  const bool avx2 = !simd::have_avx512();
  c.pool->parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t n = u / (per_sample * row_groups), rest = u % (per_sample * row_groups);
      const int64_t p0 = (rest / row_groups) * cols, pc = std::min(cols, P - p0);
      const int64_t r0 = (rest % row_groups) * rows_per, r1 = std::min(M, r0 + rows_per);
      const float* xn = X + n * in_sz + p0;
      float* yn = Y + n * out_sz + p0;
      if (avx2) {  // all the unit's rows in one call: each 24-column panel of X stays in L1 across them
        simd::sgemm_nn_rows_avx2(r1 - r0, pc, C, w + r0 * C, C, xn, P, yn + r0 * P, P, b ? b + r0 : nullptr, a,
                                 R ? R + n * out_sz + r0 * P + p0 : nullptr);
        continue;
      }
      for (int64_t m0 = r0; m0 < r1; m0 += 8) {
        const int64_t mr = std::min<int64_t>(8, r1 - m0);
        const float* bm = b ? b + m0 : nullptr;
        if (R) {
          alignas(64) float t[8 * kPwCols];
          simd::sgemm_nn(mr, pc, C, w + m0 * C, C, xn, P, t, pc);
          for (int64_t m = m0; m < m0 + mr; ++m)
            residual_act(t + (m - m0) * pc, R + n * out_sz + m * P + p0, yn + m * P, pc, b ? b[m] : 0.f,
                         a.kind == ConvAct::kRelu);
          continue;
        }
        if (a.kind == ConvAct::kSiLU) {
          simd::sgemm_nn_rows(mr, pc, C, w + m0 * C, C, xn, P, yn + m0 * P, P, bm, a);
          continue;
        }
        simd::sgemm_nn(mr, pc, C, w + m0 * C, C, xn, P, yn + m0 * P, P);
        if (b || relu || act.kind != ConvAct::kNone)
          for (int64_t m = m0; m < m0 + mr; ++m)
            bias_act(yn + m * P, yn + m * P, P, b ? b + m : nullptr, 1, pc, relu, act);
      }
    }
  });
}

namespace {
// Floats of X a lanes unit's pixel chunk holds at most (it stays in L2 across the unit's
// panels), and where the weights are 4x the map or more. Each chunk streams all of W:
// squeezenet1_1's 512 -> 1000 classifier on 13x13 (2 MiB of W) ran as 2 chunks, and at 2
// threads each thread took a chunk and streamed all of W; in one chunk W goes by once and the
// threads split the panels. Per-op mean, 3 alternating rounds: 1127 -> 1061 us at 1 thread, 653
// -> 628 at 2, 9727 -> 9106 at batch 8.
constexpr int64_t kPwLanesXFloats = 65536;
constexpr int64_t kPwLanesWideXFloats = 262144;
}  // namespace

// Pointwise conv on simd::pw_lanes: units of (sample, pixel chunk, 32-channel panel), the
// chunk's X ([C][chunk]) staying in L2 across its panels, a panel's W ([C][32])
// in L1/L2 across the chunk's 8-pixel tiles. Threads split the units. A fused residual Add
// (+ Relu: folded_act) is added by the tile's store (a unit writes only its own panel x
// chunk of Y, and reads the residual there first, so R may be Y).
void ConvKernel::run_pointwise_lanes(const RunCtx& c) const {
  if (const int64_t T = split_input_threads(c)) return run_pointwise_split_input(c, T);
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t P = g.P(), in_sz = g.C * P, out_sz = g.M * P, panels = pwl.panels();
  // Pixel chunks: X's chunk at most ~256 KiB (1 MiB where the weights are 4x the map or more:
  // see kPwLanesWideXFloats), at least two units a thread where the map has
  // the tiles, each chunk the same whole number of 8-pixel tiles but the last, which takes the
  // rest (49 pixels, one panel, 2 threads: 16 + 16 + 16 + 1; an earlier 32 + 17 split of that
  // map measured 1.35x slower).
  // Units take the panels in pairs (simd::pw_lanes_pair's 6 x 64 tiles), a last odd one alone.
  // MEMLANE_PW_LANES_NARROW=1: one panel a unit, 8 x 32 tiles (A/B).
  static const bool narrow = std::getenv("MEMLANE_PW_LANES_NARROW") != nullptr;
  const int64_t per_unit = narrow ? 1 : 2, groups = (panels + per_unit - 1) / per_unit;
  const int64_t T = c.pool->threads();
  static const bool narrow_x = std::getenv("MEMLANE_PW_LANES_NARROW_X") != nullptr;  // 256 KiB always (A/B)
  const int64_t x_floats = !narrow_x && g.M >= 4 * P ? kPwLanesWideXFloats : kPwLanesXFloats;
  const int64_t most = std::max<int64_t>(8, x_floats / std::max<int64_t>(g.C, 1) / 8 * 8);
  int64_t chunks = (P + most - 1) / most;
  if (T > 1) chunks = std::max(chunks, std::min((P + 7) / 8, (2 * T + c.batch * groups - 1) / (c.batch * groups)));
  const int64_t pc = ((P + chunks - 1) / chunks + 7) / 8 * 8;
  chunks = (P + pc - 1) / pc;
  const int64_t per_sample = chunks * groups;
  const int64_t grain =
      std::max<int64_t>(1, 400000 / std::max<int64_t>(per_unit * simd::kPwLanesPanel * std::min(pc, P) * g.C, 1));
  const ConvAct a = folded_act();
  const float* R = has_res ? res.at(c) : nullptr;
  c.pool->parallel_for(c.batch * per_sample, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t n = u / per_sample, ch = u % per_sample / groups, pn = u % groups * per_unit;
      const int64_t p0 = ch * pc, p1 = std::min(P, p0 + pc);
      const float* Rn = R ? R + n * out_sz : nullptr;
      if (pn + 1 < panels && per_unit == 2) simd::pw_lanes_pair(pwl, pn, X + n * in_sz, Y + n * out_sz, P, p0, p1, a, Rn);
      else simd::pw_lanes(pwl, pn, X + n * in_sz, Y + n * out_sz, P, p0, p1, a, Rn);
    }
  });
}

// MEMLANE_PW_NO_SPLIT_INPUT=1: such convs split their output as the others (A/B).
bool ConvKernel::split_input_fits() const {
  static const bool off = std::getenv("MEMLANE_PW_NO_SPLIT_INPUT") != nullptr;
  const bool kernel = pointwise_lanes || (pointwise_simd && simd::have_avx512());
  return kernel && !off && g.C >= kSplitInputMinRatio * g.M &&
         (g.P() <= kSplitInputMaxPixels || input_split_by_channels);
}

int64_t ConvKernel::split_input_threads(const RunCtx& c) const {
  const int64_t T = std::min<int64_t>(threads, c.pool->threads());
  return c.batch == 1 && T > 1 && g.C >= kSplitInputMinShare * T && split_input_fits() ? T : 0;
}

// A batch of one on T threads, input channels split: thread t sums its share of C (whole
// 16-channel blocks, in order: the caller's first) for every output channel and pixel into a
// partial Y of its own in the workspace; then thread t adds the T partials, the bias and the
// residual over its share of the pixels and applies the activation.
// Why: split by output channels or by pixels, as the other convs, each thread reads every
// input channel of its pixels, and the kernel before (a depthwise conv, a Concat, a pool, a
// pointwise conv on a small map) wrote half of them on the other core, having split its
// output by channels in this order. On a 2-vCPU Intel Xeon a 384 -> 64 projection at 14x14
// took as long on 2 threads as on 1 (60 against 59 us); split this way, 42. Each thread reads
// the other's partial over half the pixels instead (M x P / 2 floats, against C x P / 2 of
// X: a quarter or less) and the call hands off twice. On larger maps only a Concat's and a
// pool's split are known (input_split_by_channels): the fused 1x1 -> depthwise kernel splits
// rows there, and mobilenet_v2 ran 2.7 % slower with its 28x28 projections split. The sums
// run in two halves added, so the floats differ from one thread's in the last bits.
void ConvKernel::run_pointwise_split_input(const RunCtx& c, int64_t T) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t P = g.P(), M = g.M, C = g.C, blocks = C / 16;
  float* partial = c.workspace;  // [T][M][P]
  c.pool->parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t k0 = blocks * t / T * 16, k1 = t + 1 == T ? C : blocks * (t + 1) / T * 16;
      float* part = partial + t * M * P;
      if (pointwise_lanes) {
        simd::pw_lanes_partial(pwl, X, part, P, k0, k1);
        continue;
      }
      // run_pointwise_simd's blocks: 8 rows of W (their K range) in L1 across a panel's columns
      for (int64_t p0 = 0; p0 < P; p0 += kPwCols)
        for (int64_t m0 = 0; m0 < M; m0 += 8)
          simd::sgemm_nn(std::min<int64_t>(8, M - m0), std::min(kPwCols, P - p0), k1 - k0, w + m0 * C + k0, C,
                         X + k0 * P + p0, P, part + m0 * P + p0, P);
    }
  });
  const ConvAct a = folded_act();
  const float* R = has_res ? res.at(c) : nullptr;
  const bool res_relu = R && a.kind == ConvAct::kRelu;  // with a residual only the Add's Relu follows
  c.pool->parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t q0 = P * t / T, q1 = P * (t + 1) / T;
      for (int64_t m = 0; m < M; ++m) {
        // (R may be Y itself: each R[q] is read before Y[q] is written)
        float* ym = Y + m * P;
        const float* p0 = partial + m * P;
        const float bm = b ? b[m] : 0.f;
        if (R) {
          const float* rm = R + m * P;
          for (int64_t q = q0; q < q1; ++q) ym[q] = p0[q] + bm + rm[q];
        } else {
          for (int64_t q = q0; q < q1; ++q) ym[q] = p0[q] + bm;
        }
        for (int64_t s = 1; s < T; ++s) {
          const float* ps = partial + (s * M + m) * P;
          for (int64_t q = q0; q < q1; ++q) ym[q] += ps[q];
        }
        if (res_relu)
          for (int64_t q = q0; q < q1; ++q) ym[q] = std::max(ym[q], 0.f);
        else if (!R)
          conv_activate(ym + q0, q1 - q0, a);
      }
    }
  });
}

}  // namespace memlane::cpu::conv_detail
