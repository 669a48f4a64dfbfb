// Conv (2-D, NCHW): im2col + sgemm (sgemm_pool.h); 1x1/stride-1/no-pad convs multiply the input
// directly. Small images are batched: the columns of several samples go into one sgemm
// (one call per chunk instead of per sample, which is what dominates at 8x8 inputs).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu/conv_depthwise.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_flat.h"
#include "cpu/conv_winograd.h"
#include "cpu/env_count.h"
#include "cpu/kernel.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx512.h"
#include "cpu/simd/pw_lanes.h"

namespace memlane::cpu {
namespace {

// Upper bound for the batched columns + product (floats); beyond it chunks shrink to one sample.
// Samples whose columns go into one sgemm: batch small images only while M*N*K stays
// under ~1e6, where OpenBLAS uses its unpacked small-matrix kernel; bigger products go
// through its packing path, which measured slower per flop on these convs.
constexpr int64_t kSmallProductMNK = 1000000;
inline int64_t small_product_samples(int64_t M, int64_t K, int64_t cols) {
  const int64_t per = std::max<int64_t>(1, M * K * cols);
  return std::max<int64_t>(1, kSmallProductMNK / per);
}
// Multiply-adds a thread must get before the im2col path splits a conv's output rows.
constexpr int64_t kMinConvMacsPerThread = int64_t(1) << 20;
constexpr uint64_t kBatchedWorkspaceFloats = uint64_t(512) << 10;  // 2 MiB: stays in L2/L3

struct ConvGeom {
  int64_t C, H, W, M, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw, group;
  int64_t Cg() const { return C / group; }
  int64_t Mg() const { return M / group; }
  int64_t K() const { return Cg() * kh * kw; }
  int64_t P() const { return OH * OW; }
};

// Columns of one sample and one group: col[(c*kh+i)*kw+j][p], row stride ld, for the output
// rows [oh0, oh1) (p = oh * OW + ow). The valid output-column range of each kernel tap is
// computed once, so the inner loops are plain (vectorisable) copies; memcpy calls cost more
// than the copy on 4- to 16-wide rows.
void im2col(const ConvGeom& g, const float* x, float* col, int64_t ld, int64_t oh0, int64_t oh1) {
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
          float* __restrict r = row + oh * OW;
          const int64_t ih = oh * g.sh - g.pt + i * g.dh;
          if (ih < 0 || ih >= H) {
            for (int64_t ow = 0; ow < OW; ++ow) r[ow] = 0.f;
            continue;
          }
          const float* __restrict xr = xc + ih * W + woff;
          for (int64_t ow = 0; ow < lo; ++ow) r[ow] = 0.f;
          if (sw == 1)
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow];
          else
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * sw];
          for (int64_t ow = hi; ow < OW; ++ow) r[ow] = 0.f;
        }
      }
    }
  }
}

// y[m][p] = act(src[m][p] + b[m]) over Mg rows of P, src row stride lds.
// act: a folded activation, applied to each row while it is in cache.
inline void bias_act(float* y, const float* src, int64_t lds, const float* b, int64_t Mg, int64_t P,
                     bool relu, const ConvAct& act = {}) {
  for (int64_t m = 0; m < Mg; ++m) {
    const float bm = b ? b[m] : 0.f;
    float* yr = y + m * P;
    const float* sr = src + m * lds;
    if (relu)
      for (int64_t p = 0; p < P; ++p) { float v = sr[p] + bm; yr[p] = v > 0.f ? v : 0.f; }
    else
      for (int64_t p = 0; p < P; ++p) yr[p] = sr[p] + bm;
    conv_activate(yr, P, act);
  }
}

// Pointwise convs on simd::sgemm_nn: columns a block (see run_pointwise_simd), and the
// smallest map that takes it. Measured per layer against OpenBLAS (1 thread, thread CPU time,
// mobilenet_v2 / efficientnet_b0 shapes): 0.80-0.99x of OpenBLAS's time from 14x14 maps up,
// 1.05-1.08x on 7x7 maps (49 columns: one full 32-column step and a 17-wide tail).
constexpr int64_t kPwCols = 512;
constexpr int64_t kPwSimdMinP = 128;
// Pointwise convs with the output channels in the lanes (simd/pw_lanes.h): maps up to 32x32
// (MEMLANE_CONV_PW_LANES_MAXP overrides: a tuning aid), where the channels fill their 16-lane
// vectors at least as well as the pixels fill those of the pixels-in-lanes paths. Measured per
// layer against sgemm_nn / OpenBLAS (1 thread, min of 45 runs, mobilenet_v2 and
// efficientnet_b0): 0.68-0.83 on 7x7 maps, 0.77-0.88 on 14x14, 0.77-0.96 on 28x28; 1.12 on a
// 28x28 map with 40 output channels (48 lanes for 40) against 784 pixels in 49 full vectors,
// and 1.2-1.7 on 56x56 and 112x112 maps (the transposing store and 16/24-channel projections).
constexpr int64_t kPwLanesMaxP = 1024;
inline bool pw_lanes_fit(int64_t M, int64_t P) {
  const auto ceil16 = [](int64_t v) { return (v + 15) / 16 * 16; };
  return M * ceil16(P) >= P * ceil16(M);  // M / ceil16(M) >= P / ceil16(P)
}

class ConvKernel final : public Kernel {
 public:
  ConvGeom g{};
  TensorRef x, y;
  TensorRef res;          // fused residual Add (has_res)
  bool has_res = false;
  const float* w = nullptr;
  const float* b = nullptr;
  bool relu = false;
  ConvAct act;             // a folded activation other than Relu (applied after the product)
  bool pointwise = false;  // 1x1, stride 1, no pad, group 1: no im2col
  bool pointwise_simd = false;  // pointwise on simd::sgemm_nn (conv_pointwise_simd's rule)
  bool pointwise_lanes = false;  // pointwise with the channels in the lanes (small maps)
  simd::PwLanesWeights pwl;      // pointwise_lanes: W packed at load
  // Stride-1 convs compute on the padded-width grid: the input is copied once into a
  // zero-bordered plane (Hp x Wp) and every im2col row is then ONE contiguous copy of
  // OH*Wp floats; the Wp-OW extra columns of the product are dropped when the output is
  // written. Cheaper than a bounds-checked im2col of OW-wide segments (which cost as much
  // as the sgemm on 16x16 images).
  bool padded = false;
  bool direct = false;  // padded and conv_direct_supported: no im2col at all (conv_direct.h)
  bool winograd = false;  // 3x3 stride 1 with conv_winograd_supported (conv_winograd.h)
  bool flat = false;      // padded, small maps without direct: the flattened grid (conv_flat.h)
  std::vector<float> U;   // winograd: transformed weights [16][M][C]
  int threads = 1;        // winograd: scratch slices, one a thread
  int64_t Hp = 0, Wp = 0, pb = 0, pr = 0;
  // The folded activation's output overlaps X (the planner gave it X's place, X dying here):
  // run() first copies the chunk's X to the front of the workspace, the paths then read that
  // copy (input()) and get the workspace after it. Costs one copy of X, saves the activation's
  // pass over the (larger) output.
  bool copy_input = false;
  uint64_t input_copy_floats(int64_t batch) const { return copy_input ? uint64_t(batch * g.C * g.H * g.W + 15) / 16 * 16 : 0; }
  const float* input(const RunCtx& c) const { return copy_input ? c.workspace - input_copy_floats(c.batch) : x.at(c); }
  int64_t plane() const { return Hp * Wp; }
  int64_t slack() const { return conv_direct_slack(g.kw, g.dw); }
  int64_t Pp() const { return g.OH * Wp; }  // columns per sample on the padded grid

  // Samples per chunk for the padded path.
  int64_t padded_chunk(int64_t batch) const {
    const uint64_t per = uint64_t(g.Cg() * plane() + (g.K() + g.Mg()) * Pp());
    int64_t s = per ? int64_t(kBatchedWorkspaceFloats / per) : batch;
    s = std::min(s, small_product_samples(g.Mg(), g.K(), Pp()));
    return std::clamp<int64_t>(s, 1, batch);
  }
  uint64_t padded_ws(int64_t s) const {
    return uint64_t(s * g.Cg() * plane() + slack() + (g.K() + g.Mg()) * Pp() * s);
  }

  // The activation the kernels apply in registers: the folded one (act) or the plan's Relu.
  ConvAct folded_act() const {
    ConvAct a = act;
    if (relu) a.kind = ConvAct::kRelu;
    return a;
  }
  ConvAct relu_act() const {
    ConvAct a;
    if (relu) a.kind = ConvAct::kRelu;
    return a;
  }

  // a: the activation conv_direct applies (the direct path: all of it; Winograd's lone-sample
  // fallback: only Relu, its caller applies the rest).
  void run_direct(const RunCtx& c, const ConvAct& a, int64_t from = 0) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), K = g.K(), Cg = g.Cg(), Mg = g.Mg();
    // Intra-op threads split the output channels (blocks of 8 within a group) and share the
    // padded input; group gi reads its Cg channels' planes and writes its Mg outputs.
    const int64_t per = (Mg + 7) / 8, blocks = g.group * per;
    const int64_t chan = g.sw == 2 ? 2 * Hp * ((Wp + 1) / 2) : Hp * Wp;  // floats a padded channel
    const int64_t grain = std::max<int64_t>(1, 400000 / std::max<int64_t>(8 * K * g.P(), 1));
    const float* R = has_res ? res.at(c) : nullptr;
    for (int64_t n = from; n < c.batch; ++n) {
      conv_direct_fill(X + n * in_sz, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, g.sw, g.kw, g.dw, c.workspace);
      float* yn = Y + n * out_sz;
      c.pool->parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
        for (int64_t bi = b0; bi < b1;) {
          const int64_t gi = bi / per, e = std::min(b1, (gi + 1) * per);  // blocks of this group in range
          const int64_t m0 = gi * Mg + (bi - gi * per) * 8, m1 = gi * Mg + std::min(Mg, (e - gi * per) * 8);
          conv_direct(c.workspace + gi * Cg * chan, Cg, Hp, Wp, w + m0 * K, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw,
                      b ? b + m0 : nullptr, yn + m0 * g.P(), m1 - m0, g.OH, g.OW, a,
                      R ? R + n * out_sz + m0 * g.P() : nullptr);
          bi = e;
        }
      });
    }
  }

  // Flattened padded grid: the padded input once a sample, then slices of the output channels
  // (blocks of 8), one a thread, each with its own grid scratch.
  void run_flat(const RunCtx& c) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), K = g.K();
    const float* R = has_res ? res.at(c) : nullptr;
    const int64_t padFloats = (conv_direct_floats(g.C, Hp, Wp, 1, g.kw, g.dw) + 15) / 16 * 16;
    const int64_t scratch = conv_flat_scratch(g.OH, Wp), blocks = (g.M + 7) / 8;
    const int64_t slots = std::clamp<int64_t>(std::min<int64_t>(threads, c.pool->threads()), 1, blocks);
    for (int64_t n = 0; n < c.batch; ++n) {
      conv_direct_fill(X + n * in_sz, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, 1, g.kw, g.dw, c.workspace);
      float* yn = Y + n * out_sz;
      const float* rn = R ? R + n * out_sz : nullptr;
      c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          const int64_t m0 = std::min(g.M, blocks * s / slots * 8), m1 = std::min(g.M, blocks * (s + 1) / slots * 8);
          if (m1 <= m0) continue;
          conv_flat(c.workspace, g.C, Hp, Wp, w + m0 * K, g.kh, g.kw, g.dh, g.dw, b ? b + m0 : nullptr, yn + m0 * g.P(),
                    m1 - m0, g.OH, g.OW, relu, rn ? rn + m0 * g.P() : nullptr, c.workspace + padFloats + s * scratch);
        }
      });
    }
  }

  // Winograd: the input in the even/odd column layout, then slices of the 32-tile blocks, one
  // a thread, each with its own scratch.
  void run_winograd(const RunCtx& c) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P();
    const float* R = has_res ? res.at(c) : nullptr;
    const int64_t padFloats = conv_direct_floats(g.C, Hp, Wp, 2, 3, 1), scratch = conv_winograd_scratch(g.C, g.M);
    const int64_t spb = conv_winograd_samples(g.OH, g.OW);
    const int64_t slots = std::min<int64_t>(threads, c.pool->threads());
    float* work = c.workspace + spb * padFloats;
    for (int64_t n = 0; n < c.batch; n += spb) {
      const int64_t cnt = std::min(spb, c.batch - n);
      if (cnt < spb) {  // a lone sample of a two-sample block: half the products would be wasted
        run_direct(c, relu_act(), n);
        continue;
      }
      for (int64_t s = 0; s < cnt; ++s)
        conv_direct_fill(X + (n + s) * in_sz, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, 2, 3, 1, c.workspace + s * padFloats);
      float* yn = Y + n * out_sz;
      const float* rn = R ? R + n * out_sz : nullptr;
      if (slots <= 1) {
        conv_winograd(c.workspace, padFloats, cnt, g.C, U.data(), b, yn, g.M, g.OH, g.OW, relu, work, 0, -1, rn);
        continue;
      }
      c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s)
          conv_winograd(c.workspace, padFloats, cnt, g.C, U.data(), b, yn, g.M, g.OH, g.OW, relu, work + s * scratch, s,
                        slots, rn);
      });
    }
  }

  void run_padded(const RunCtx& c) const {
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

  // Columns a pointwise product panel takes: its M x cols output about 256 KiB (L2-resident),
  // at least 256 columns (OpenBLAS call and packing overhead). MEMLANE_CONV_PANEL overrides
  // (a tuning aid; 0 = the whole map in one product).
  int64_t pointwise_panel() const {
    static const int64_t forced = env_count("MEMLANE_CONV_PANEL", -1);
    if (forced == 0) return g.P();
    if (forced > 0) return forced;
    return std::max<int64_t>(256, (65536 / std::max<int64_t>(g.M, 1)) / 64 * 64);
  }

  // Samples per sgemm in the batched path.
  int64_t chunk(int64_t batch) const {
    const uint64_t per = uint64_t(g.K() + g.M) * g.P();
    int64_t s = per ? int64_t(kBatchedWorkspaceFloats / per) : batch;
    s = std::min(s, small_product_samples(g.M, g.K(), g.P()));
    return std::clamp<int64_t>(s, 1, batch);
  }

  uint64_t workspace_floats(int64_t maxBatch) const override { return input_copy_floats(maxBatch) + path_floats(maxBatch); }

  // The channels-in-lanes path reads only its panels (W and the bias); Winograd reads U, except
  // on maps it takes two samples at a time (8x8), where a lone sample (every batch-1 run) goes
  // to the direct kernel on W.
  std::vector<const float*> repacked_weights() const override {
    if (pointwise_lanes) return {w, b};
    if (winograd && conv_winograd_samples(g.OH, g.OW) == 1) return {w};
    return {};
  }

  uint64_t path_floats(int64_t maxBatch) const {
    if (pointwise) return 0;
    if (winograd)
      return uint64_t(conv_winograd_samples(g.OH, g.OW) * conv_direct_floats(g.C, Hp, Wp, 2, 3, 1) +
                      threads * conv_winograd_scratch(g.C, g.M));
    if (direct) return uint64_t(conv_direct_floats(g.C, Hp, Wp, g.sw, g.kw, g.dw));
    if (flat)
      return uint64_t((conv_direct_floats(g.C, Hp, Wp, 1, g.kw, g.dw) + 15) / 16 * 16 +
                      threads * conv_flat_scratch(g.OH, Wp));
    if (padded) return padded_ws(g.group == 1 ? padded_chunk(maxBatch) : 1);
    int64_t s = chunk(maxBatch);
    if (g.group == 1 && s > 1) return uint64_t(g.K() + g.M) * g.P() * s;
    return uint64_t(g.K()) * g.P();
  }

  void run(const RunCtx& c) const override {
    if (!copy_input) return run_paths(c);
    std::memcpy(c.workspace, x.at(c), sizeof(float) * uint64_t(c.batch * g.C * g.H * g.W));
    RunCtx after = c;
    after.workspace = c.workspace + input_copy_floats(c.batch);
    run_paths(after);
  }

  void run_paths(const RunCtx& c) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), P = g.P();
    if (pointwise_lanes) return run_pointwise_lanes(c);
    if (pointwise_simd) return run_pointwise_simd(c);
    if (pointwise) {
      // Column panels of the product whose output (M x cols) fits in L2, each with its bias and
      // activation applied while it is there, instead of one product then a pass over all of Y.
      // (With intra-op threads the pool splits each product; narrow panels would starve it.)
      const int64_t cols = c.pool->threads() > 1 ? P : pointwise_panel();
      const bool epi = b || relu || act.kind != ConvAct::kNone;
      for (int64_t n = 0; n < c.batch; ++n) {
        float* yn = Y + n * out_sz;
        for (int64_t p0 = 0; p0 < P; p0 += cols) {
          const int64_t pc = std::min(cols, P - p0);
          sgemm_pool(c.pool, false, g.M, pc, g.C, 1.f, w, g.C, X + n * in_sz + p0, P, 0.f, yn + p0, P);
          if (epi)
            for (int64_t m = 0; m < g.M; ++m) bias_act(yn + m * P + p0, yn + m * P + p0, P, b ? b + m : nullptr, 1, pc, relu, act);
        }
      }
      return;
    }
    if (!run_product(c) && act.kind != ConvAct::kNone) conv_activate(Y, c.batch * out_sz, act);
  }

  // Pointwise conv as Y[M x P] = W[M x C] X[C x P] on the register-tiled AVX-512 product: units
  // of 8 output rows x 512 columns (W's 8 rows stay in L1 across the 32-column steps). A folded
  // SiLU is applied in registers with the bias (sgemm_nn_rows: 0.90-0.94 of the pass after on
  // efficientnet_b0's expansions); bias, Relu and Clip in a pass over the block while it is in
  // L1 (in registers measured 1.14-1.27x slower on efficientnet's bias-only 16/24-channel
  // projections and 1.11-1.16x on mobilenet_v2's Clip expansions, not understood yet). Threads split
  // samples x column panels, and the rows too when there are fewer panels than threads.
  void run_pointwise_simd(const RunCtx& c) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t P = g.P(), M = g.M, C = g.C, in_sz = C * P, out_sz = M * P;
    const int64_t panels = (P + kPwCols - 1) / kPwCols, per_sample = panels;
    const int64_t T = c.pool->threads();
    const int64_t row_groups = std::clamp<int64_t>(c.batch * panels >= T ? 1 : T, 1, (M + 7) / 8);
    const int64_t rows_per = ((M + row_groups - 1) / row_groups + 7) / 8 * 8;
    const int64_t units = c.batch * per_sample * row_groups;
    const int64_t grain = std::max<int64_t>(1, 400000 / std::max<int64_t>(rows_per * kPwCols * C, 1));
    const ConvAct a = folded_act();
    c.pool->parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t n = u / (per_sample * row_groups), rest = u % (per_sample * row_groups);
        const int64_t p0 = (rest / row_groups) * kPwCols, pc = std::min(kPwCols, P - p0);
        const int64_t r0 = (rest % row_groups) * rows_per, r1 = std::min(M, r0 + rows_per);
        const float* xn = X + n * in_sz + p0;
        float* yn = Y + n * out_sz + p0;
        for (int64_t m0 = r0; m0 < r1; m0 += 8) {
          const int64_t mr = std::min<int64_t>(8, r1 - m0);
          if (a.kind == ConvAct::kSiLU) {
            simd::sgemm_nn_rows(mr, pc, C, w + m0 * C, C, xn, P, yn + m0 * P, P, b ? b + m0 : nullptr, a);
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

  // Pointwise conv on simd::pw_lanes: units of (sample, pixel chunk, 32-channel panel), the
  // chunk's X ([C][chunk]) staying in L2 across its panels, a panel's W ([C][32])
  // in L1/L2 across the chunk's 8-pixel tiles. Threads split the units.
  void run_pointwise_lanes(const RunCtx& c) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t P = g.P(), in_sz = g.C * P, out_sz = g.M * P, panels = pwl.panels();
    // Pixel chunks: X's chunk at most ~256 KiB, at least two units a thread where the map has
    // the tiles, each chunk the same whole number of 8-pixel tiles but the last, which takes the
    // rest (49 pixels, one panel, 2 threads: 16 + 16 + 16 + 1; an earlier 32 + 17 split of that
    // map measured 1.35x slower).
    const int64_t T = c.pool->threads();
    const int64_t most = std::max<int64_t>(8, 65536 / std::max<int64_t>(g.C, 1) / 8 * 8);
    int64_t chunks = (P + most - 1) / most;
    if (T > 1) chunks = std::max(chunks, std::min((P + 7) / 8, (2 * T + c.batch * panels - 1) / (c.batch * panels)));
    const int64_t pc = ((P + chunks - 1) / chunks + 7) / 8 * 8;
    chunks = (P + pc - 1) / pc;
    const int64_t per_sample = chunks * panels;
    const int64_t grain = std::max<int64_t>(1, 400000 / std::max<int64_t>(simd::kPwLanesPanel * std::min(pc, P) * g.C, 1));
    const ConvAct a = folded_act();
    c.pool->parallel_for(c.batch * per_sample, grain, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t n = u / per_sample, ch = u % per_sample / panels, pn = u % panels;
        const int64_t p0 = ch * pc, p1 = std::min(P, p0 + pc);
        simd::pw_lanes(pwl, pn, X + n * in_sz, Y + n * out_sz, P, p0, p1, a);
      }
    });
  }

  // True when the folded activation (act) was applied too.
  bool run_product(const RunCtx& c) const {
    const float* X = input(c);
    float* Y = y.at(c);
    const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), P = g.P();
    if (winograd) return run_winograd(c), false;
    if (direct) return run_direct(c, folded_act()), true;
    if (flat) return run_flat(c), false;
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
    for (int64_t n = 0; n < c.batch; ++n) {
      for (int64_t gi = 0; gi < g.group; ++gi) {
        const float* xg = X + n * in_sz + gi * Cg * g.H * g.W;
        float* yg = Y + n * out_sz + gi * Mg * P;
        const float* bg = b ? b + gi * Mg : nullptr;
        c.pool->parallel_for(g.OH, grain, [&](int64_t oh0, int64_t oh1) {
          const int64_t p0 = oh0 * g.OW, pc = (oh1 - oh0) * g.OW;
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
};

}  // namespace

std::unique_ptr<Kernel> make_conv(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 3, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Wt = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight() || !Wt.is_weight()) return unsupported(op, "expects an activation X and a weight W", st, msg);
  if (X.shape.size() != 4 || Wt.shape.size() != 4 || Y.shape.size() != 4)
    return unsupported(op, "only 2-D convolution (rank-4 X, W, Y) is supported; X " + shape_str(X.shape) +
                               ", W " + shape_str(Wt.shape), st, msg);
  const OpAttrs& a = op.attrs;
  auto k = std::make_unique<ConvKernel>();
  ConvGeom& g = k->g;
  g = {X.shape[1], X.shape[2], X.shape[3], Wt.shape[0], Y.shape[2], Y.shape[3], a.kernel[0], a.kernel[1],
       a.strides[0], a.strides[1], a.pads[0], a.pads[1], a.dilations[0], a.dilations[1], a.group};
  if (g.group < 1 || g.C % g.group || g.M % g.group || Wt.shape[1] != g.Cg())
    return unsupported(op, "group " + std::to_string(g.group) + " does not divide C=" + std::to_string(g.C) +
                               " and M=" + std::to_string(g.M) + " with W " + shape_str(Wt.shape), st, msg);
  if (Wt.shape[2] != g.kh || Wt.shape[3] != g.kw)
    return unsupported(op, "kernel attr [" + std::to_string(g.kh) + "," + std::to_string(g.kw) +
                               "] differs from W " + shape_str(Wt.shape), st, msg);
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || a.pads[0] < 0 || a.pads[1] < 0 || a.pads[2] < 0 || a.pads[3] < 0)
    return unsupported(op, "strides and dilations must be >= 1, pads >= 0", st, msg);
  const int64_t eoh = (g.H + a.pads[0] + a.pads[2] - (g.dh * (g.kh - 1) + 1)) / g.sh + 1;
  const int64_t eow = (g.W + a.pads[1] + a.pads[3] - (g.dw * (g.kw - 1) + 1)) / g.sw + 1;
  if (Y.shape[1] != g.M || eoh != g.OH || eow != g.OW)
    return unsupported(op, "output shape " + shape_str(Y.shape) + " differs from the computed [-1," +
                               std::to_string(g.M) + "," + std::to_string(eoh) + "," + std::to_string(eow) + "]", st, msg);
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->w = Wt.data;
  if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput) {
    const TensorInfo& B = bc.info(op.inputs[2]);
    if (!B.is_weight() || B.elements() != g.M)
      return unsupported(op, "bias must be a weight of M=" + std::to_string(g.M) + " elements, got " + shape_str(B.shape), st, msg);
    k->b = B.data;
  }
  k->relu = a.activation == Activation::kRelu;
  // A folded Relu / Clip / HardSwish / SiLU (the backend's activation_epilogue): every path
  // takes it; Relu joins the paths' own relu, the others run after the product (conv_act.h).
  const bool fuse = std::getenv("MEMLANE_NO_FUSION") == nullptr;
  const bool depthwise = g.group == g.C && g.M == g.C && g.C > 1 && std::getenv("MEMLANE_CONV_NO_DEPTHWISE") == nullptr;
  // Output over the input: the depthwise kernel copies each channel into its scratch plane
  // before writing that channel's output, so in place is safe there when the output is
  // exactly the input's bytes and a channel's output as large as its input. Every other path
  // reads X after writing Y: it takes a copy of X first (copy_input), where the output is at
  // least as large as X (else the copy would cost more than the activation's own pass).
  // (MEMLANE_CONV_NO_IN_PLACE=1 refuses both: A/B timing.)
  const bool in_place_ok = std::getenv("MEMLANE_CONV_NO_IN_PLACE") == nullptr;
  const auto dw_over_input = [&](const ConvEpilogue* e) {
    return depthwise && e->over_input_exact && g.OH * g.OW == g.H * g.W && in_place_ok;
  };
  const auto copy_over_input = [&] { return !depthwise && g.M * g.OH * g.OW >= g.C * g.H * g.W && in_place_ok; };
  if (const ConvEpilogue* e = bc.epilogue;
      e && e->residual < 0 && fuse && a.activation == Activation::kNone &&
      (!e->over_input || dw_over_input(e) || copy_over_input())) {
    k->copy_input = e->over_input && !depthwise;
    k->y = bc.ref(e->output);
    if (e->act.kind == ConvAct::kRelu) k->relu = true;
    else k->act = e->act;
    e->taken = true;
  }
  // Depthwise (one filter a channel): its own kernel (conv_depthwise.h). MEMLANE_CONV_NO_DEPTHWISE=1
  // keeps it on the grouped im2col path (ctest runs the ops both ways).
  if (depthwise) {
    const DwGeom dg{g.H, g.W, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw};
    ConvAct act = k->act;
    if (k->relu) act.kind = ConvAct::kRelu;
    return make_depthwise_kernel(dg, g.C, k->x, k->y, k->w, k->b, act, bc.threads);
  }
  k->pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.group == 1 && a.pads[0] == 0 &&
                 a.pads[1] == 0 && a.pads[2] == 0 && a.pads[3] == 0;
  // MEMLANE_CONV_PW_BLAS=1 keeps every pointwise conv on OpenBLAS (A/B timing; ctest runs both).
  k->pointwise_simd = k->pointwise && g.P() >= kPwSimdMinP && simd::have_avx512() &&
                      std::getenv("MEMLANE_CONV_PW_BLAS") == nullptr;
  // MEMLANE_CONV_NO_PW_LANES=1 keeps small maps on the pixels-in-lanes paths (ctest runs both).
  static const int64_t lanes_max_p = env_count("MEMLANE_CONV_PW_LANES_MAXP", kPwLanesMaxP);
  k->pointwise_lanes = k->pointwise && g.P() <= lanes_max_p && pw_lanes_fit(g.M, g.P()) && simd::have_avx512() &&
                       std::getenv("MEMLANE_CONV_PW_BLAS") == nullptr && std::getenv("MEMLANE_CONV_NO_PW_LANES") == nullptr;
  if (k->pointwise_lanes) k->pwl = simd::pw_lanes_pack(k->w, k->b, g.M, g.C);
  // MEMLANE_CONV_NO_PADDED=1 forces the bounds-checked im2col (ctest runs the ops both ways).
  k->padded = !k->pointwise && g.sh == 1 && g.sw == 1 && std::getenv("MEMLANE_CONV_NO_PADDED") == nullptr;
  k->pb = a.pads[2];
  k->pr = a.pads[3];
  k->Hp = g.H + a.pads[0] + a.pads[2];
  k->Wp = g.W + a.pads[1] + a.pads[3];
  // MEMLANE_CONV_NO_DIRECT=1 keeps the im2col paths (ctest runs the ops that way too).
  // (1x1 convs stay on sgemm: without taps to reuse, the direct kernel is broadcast-bound.)
  // Grouped convs (RegNet, ResNeXt: 8-64 channels a group) run group by group on it too.
  k->direct = !k->pointwise && g.kh * g.kw > 1 && (g.group == 1 || g.Cg() >= 4) &&
              conv_direct_supported(g.OH, g.OW, g.sw) &&
              std::getenv("MEMLANE_CONV_NO_DIRECT") == nullptr;
  // MEMLANE_CONV_NO_WINOGRAD=1 keeps such convs on the direct kernel (ctest runs both).
  k->winograd = k->direct && g.group == 1 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
                conv_winograd_supported(g.C, g.M, g.OH, g.OW) && std::getenv("MEMLANE_CONV_NO_WINOGRAD") == nullptr;
  // MEMLANE_CONV_NO_FLAT=1 keeps small stride-1 maps on the padded-grid sgemm (ctest runs both).
  k->flat = k->padded && !k->direct && g.group == 1 && g.kh * g.kw > 1 && g.kh * g.kw <= kConvFlatMaxTaps &&
            conv_flat_available() && std::getenv("MEMLANE_CONV_NO_FLAT") == nullptr;
  if (k->winograd || k->flat) k->threads = std::max(1, bc.threads);
  if (k->winograd) {
    k->U = conv_winograd_weights(k->w, g.M, g.C);
    k->threads = std::max(1, bc.threads);
  }
  // Fused residual Add (+ Relu): only the AVX-512 paths have the epilogue. The backend has
  // checked that the conv's and the Add's outputs have no other reader and that `output`
  // neither overlaps X nor partly overlaps the residual (an identical region is fine: each
  // element is read before it is written).
  if (const ConvEpilogue* e = bc.epilogue; e && e->residual >= 0 && (k->direct || k->winograd || k->flat) && !k->relu &&
                                           a.activation == Activation::kNone && fuse) {
    const TensorInfo& R = bc.info(e->residual);
    if (!R.is_weight() && R.shape == Y.shape) {
      k->res = bc.ref(e->residual);
      k->has_res = true;
      k->y = bc.ref(e->output);
      k->relu = e->relu;
      e->taken = true;
    }
  }
  return k;
}

}  // namespace memlane::cpu
