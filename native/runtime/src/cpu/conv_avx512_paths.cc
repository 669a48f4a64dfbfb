// ConvKernel's runners of the AVX-512 spatial kernels (conv_kernel.h): each fills the padded
// input its kernel reads (conv_direct_fill) and splits the output among the pool's threads.
// The kernels themselves: conv_direct.h, conv_flat.h, conv_winograd.h.
#include <algorithm>

#include "cpu/conv_direct.h"
#include "cpu/conv_flat.h"
#include "cpu/conv_kernel.h"
#include "cpu/conv_winograd.h"

namespace memlane::cpu::conv_detail {

// a: the activation conv_direct applies (the direct path: all of it; Winograd's lone-sample
// fallback: only Relu, its caller applies the rest).
void ConvKernel::run_direct(const RunCtx& c, const ConvAct& a, int64_t from) const {
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
void ConvKernel::run_flat(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), K = g.K();
  const float* R = has_res ? res.at(c) : nullptr;
  const int64_t padFloats = padded_input_floats();
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

}  // namespace memlane::cpu::conv_detail
