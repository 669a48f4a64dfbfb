// ConvKernel's runners of the AVX-512 spatial kernels (conv_kernel.h): each fills the padded
// input its kernel reads (conv_direct_fill) and splits the output among the pool's threads.
// The kernels themselves: conv_direct.h, conv_flat.h, conv_winograd.h.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cpu/conv_direct.h"
#include "cpu/conv_flat.h"
#include "cpu/conv_kernel.h"
#include "cpu/conv_winograd.h"

namespace memlane::cpu::conv_detail {

namespace {

// MEMLANE_CONV_DIRECT_SPLIT: how intra-op threads share a direct conv: "rows" (bands of output
// rows), "channels" (blocks of output channels), or unset: by the rule in run_direct.
enum class DirectSplit { kAuto, kRows, kChannels };
DirectSplit direct_split() {
  static const DirectSplit s = [] {
    const char* e = std::getenv("MEMLANE_CONV_DIRECT_SPLIT");
    if (e && std::string(e) == "rows") return DirectSplit::kRows;
    if (e && std::string(e) == "channels") return DirectSplit::kChannels;
    return DirectSplit::kAuto;
  }();
  return s;
}
// The rule: bands of rows where each thread gets at least kMinBandSteps of the kernel's row steps
// and a group's weights are at most 1/kRowsInputOverWeights of its padded input. Split by
// rows, every thread reads all the weights and half the input; by channels, half the weights
// and all the input. Measured at 2 threads, batch 1, per-op minimum / mean over 4 interleaved
// runs, channels -> rows: the 3 -> 16..64 stride-2 stems of mobilenet_v3_small 174 / 245 ->
// 116 / 156 us, mobilenet_v2 245 / 378 -> 189 / 302, regnet_x_400mf 207 / 334 -> 184 / 296;
// squeezenet1_1's 3x3 expands at 13x13 (64 -> 256, weights 4x the input) 138 -> 187 us.
constexpr int64_t kMinBandSteps = 2;
constexpr int64_t kRowsInputOverWeights = 16;

}  // namespace

// Channels of the padded input, a contiguous share a thread; the paths after it (Winograd, pixel
// rows, flat, direct by channels) read the whole padded input on every thread, so a serial fill
// only kept the other threads waiting (at 2 threads, resnet18 batch 1, the fills were about 2 %
// of all samples, on the caller alone). Channels, not bands of rows: a band is a piece of every
// plane, so the two threads' writes (and the reads of a spatially split producer's output)
// interleave a few hundred bytes to a few KiB apart, and that pattern cost more than reading half
// the input from the other core. A fill of 64 x 56 x 56 (sw 1) by 2 threads pinned to the 2
// cores: 27-31 us a thread by rows, 17-18 by channels (256 x 14 x 14: 43-49 against 15-18);
// with the 2 vCPUs on distant cores (a 320 ns cache-line round trip between them instead of 55:
// docs/native-cpu.md, "Two threads on a split placement") 61-70 against 23-27 us. In the model,
// resnet18 batch 1, 2 threads, runs alternating: 15.95 -> 15.58 ms p50 (split: 21.1-21.5 -> 20.7-20.9),
// densenet121 0.97x, squeezenet1_1, mobilenet_v2 0.99x, regnet_x_400mf 0.98x, efficientnet_b0
// 1.00-1.03x. Inputs under kParallelFillFloats stay on the caller; fewer than 4 channels a thread
// (an image's 3) split by rows, which share evenly. MEMLANE_CONV_SERIAL_FILL=1: always serial;
// MEMLANE_CONV_FILL_ROWS=1: always bands of rows, as before (A/B).
void ConvKernel::fill_padded(const RunCtx& c, const float* xn, float* pad, int64_t sw) const {
  static const bool serial = std::getenv("MEMLANE_CONV_SERIAL_FILL") != nullptr;
  static const bool rows_always = std::getenv("MEMLANE_CONV_FILL_ROWS") != nullptr;
  const int64_t T = c.pool->threads();
  const int64_t floats = conv_direct_floats(g.C, Hp, Wp, sw, g.kw, g.dw);
  const bool by_rows = rows_always || g.C < 4 * T;
  if (serial || T <= 1 || floats < kParallelFillFloats || (by_rows && Hp < 2 * T))
    return conv_direct_fill(xn, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, sw, g.kw, g.dw, pad);
  c.pool->parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (by_rows)
        conv_direct_fill_rows(xn, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, sw, g.kw, g.dw, pad, Hp * t / T, Hp * (t + 1) / T);
      else
        conv_direct_fill_channels(xn, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, sw, g.kw, g.dw, pad, g.C * t / T,
                                  g.C * (t + 1) / T);
    }
  });
}

// a: the activation conv_direct applies (the direct path: all of it; Winograd's lone-sample
// fallback: only Relu, its caller applies the rest).
void ConvKernel::run_direct(const RunCtx& c, const ConvAct& a, int64_t from) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), K = g.K(), Cg = g.Cg(), Mg = g.Mg();
  const int64_t chan = g.sw == 2 ? 2 * Hp * ((Wp + 1) / 2) : Hp * Wp;  // floats a padded channel
  const float* R = has_res ? res.at(c) : nullptr;
  const int64_t T = c.pool->threads(), step = conv_direct_row_step(g.OW), steps = (g.OH + step - 1) / step;
  const DirectSplit split = direct_split();
  const bool rows_by_rule = steps >= kMinBandSteps * T && Hp * Wp >= kRowsInputOverWeights * Mg * g.kh * g.kw;
  if (T > 1 && split != DirectSplit::kChannels && (split == DirectSplit::kRows || rows_by_rule)) {
    // Bands of output rows, one a thread: each thread fills the padded rows its band starts on
    // and computes every channel of its band, so the input it reads (but a few halo rows) is
    // in its own cache. Split by channels, every thread read the whole padded input from the
    // filling thread's cache, and the fill ran on one thread while the other waited: a 3 -> 32
    // stride-2 stem at 224 px, 2 threads, took 84 us to fill (19 us at 1 thread, whose cache
    // held the previous run's padded input) and 148 / 194 us for the filler's / the other
    // thread's half of the channels.
    const auto row = [&](int64_t b) { return std::min(g.OH, steps * b / T * step); };
    for (int64_t n = from; n < c.batch; ++n) {
      const float* xn = X + n * in_sz;
      c.pool->parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          conv_direct_fill_rows(xn, g.C, g.H, g.W, g.pt, g.pl, Hp, Wp, g.sw, g.kw, g.dw, c.workspace,
                                t == 0 ? 0 : row(t) * g.sh, t + 1 == T ? Hp : row(t + 1) * g.sh);
      });
      float* yn = Y + n * out_sz;
      const float* rn = R ? R + n * out_sz : nullptr;
      c.pool->parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t gi = 0; gi < g.group; ++gi)
            conv_direct_rows(c.workspace + gi * Cg * chan, Cg, Hp, Wp, w + gi * Mg * K, g.kh, g.kw, g.sh, g.sw, g.dh,
                             g.dw, b ? b + gi * Mg : nullptr, yn + gi * Mg * g.P(), Mg, g.OH, g.OW, a,
                             rn ? rn + gi * Mg * g.P() : nullptr, row(t), row(t + 1));
      });
    }
    return;
  }
  // Blocks of 8 output channels within a group, the padded input shared: group gi reads its
  // Cg channels' planes and writes its Mg outputs.
  const int64_t per = (Mg + 7) / 8, blocks = g.group * per;
  const int64_t grain = std::max<int64_t>(1, 400000 / std::max<int64_t>(8 * K * g.P(), 1));
  for (int64_t n = from; n < c.batch; ++n) {
    fill_padded(c, X + n * in_sz, c.workspace, g.sw);
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
void ConvKernel::run_flat(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), K = g.K();
  const float* R = has_res ? res.at(c) : nullptr;
  const int64_t padFloats = padded_input_floats();
  const int64_t scratch = conv_flat_scratch(g.OH, Wp), blocks = (g.M + 7) / 8;
  const int64_t slots = std::clamp<int64_t>(std::min<int64_t>(threads, c.pool->threads()), 1, blocks);
  for (int64_t n = 0; n < c.batch; ++n) {
    fill_padded(c, X + n * in_sz, c.workspace, 1);
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
void ConvKernel::run_winograd(const RunCtx& c) const {
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
      fill_padded(c, X + (n + s) * in_sz, c.workspace + s * padFloats, 2);
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

}  // namespace memlane::cpu::conv_detail
