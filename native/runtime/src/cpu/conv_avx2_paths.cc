// ConvKernel's runner of the AVX2 Winograd kernel (conv_winograd_avx2.h), the 3x3 stride-1 path
// of CPUs without AVX-512: each sample's padded input, then its tile blocks split among the
// pool's threads, each with its own scratch.
#include <algorithm>

#include "cpu/conv_kernel.h"
#include "cpu/conv_winograd_avx2.h"

namespace memlane::cpu::conv_detail {

// (every group's channels: wg is one group's geometry, its pad floats one group's)
int64_t ConvKernel::winograd_avx2_pad_slice() const { return (g.group * winograd_avx2_pad_floats(wg) + 15) / 16 * 16; }

void ConvKernel::run_winograd_avx2(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const float* R = has_res ? res.at(c) : nullptr;
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P(), Mg = g.Mg();
  const int64_t scratch = winograd_avx2_scratch_floats(wg), blocks = winograd_avx2_blocks(wg);
  const int64_t group_pad = winograd_avx2_pad_floats(wg), group_u = 16 * Mg * g.Cg(), group_out = Mg * g.P();
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(threads, c.pool->threads()));
  // Units of (group, block) shared among the threads; or, one group with few blocks, shares of
  // its output channels.
  const int64_t units = g.group * blocks;
  const bool by_channels = g.group == 1 && winograd_avx2_split_channels(wg, slots);
  const ConvAct a = folded_act();
  float* pad = c.workspace;
  float* work = c.workspace + winograd_avx2_pad_slice();
  for (int64_t n = 0; n < c.batch; ++n) {
    const float* xn = X + n * in_sz;
    float* yn = Y + n * out_sz;
    const float* rn = R ? R + n * out_sz : nullptr;
    // units [u0, u1) into y, channels [m0, m1) of each group
    const auto compute = [&](float* mine, int64_t u0, int64_t u1, int64_t m0, int64_t m1) {
      for (int64_t u = u0; u < u1;) {
        const int64_t gi = u / blocks, k1 = std::min(u1, (gi + 1) * blocks) - gi * blocks;
        conv_winograd_avx2(wg, pad + gi * group_pad, U.data() + gi * group_u, b ? b + gi * Mg : nullptr,
                           yn + gi * group_out, rn ? rn + gi * group_out : nullptr, a, mine, u - gi * blocks, k1, m0, m1);
        u = gi * blocks + k1;
      }
    };
    if (slots == 1) {
      winograd_avx2_fill(wg, xn, pad, 0, g.C);
      compute(work, 0, units, 0, Mg);
      continue;
    }
    // (every block reads every channel of its group: the fill completes before any block starts)
    c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) winograd_avx2_fill(wg, xn, pad, g.C * s / slots, g.C * (s + 1) / slots);
    });
    c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        float* mine = work + s * scratch;
        if (by_channels) {  // shares of 8 channels (the product's row tiles), the last one the rest
          const int64_t m0 = std::min(Mg, Mg * s / slots / 8 * 8);
          const int64_t m1 = s + 1 == slots ? Mg : std::min(Mg, Mg * (s + 1) / slots / 8 * 8);
          if (m0 < m1) compute(mine, 0, units, m0, m1);
        } else {
          compute(mine, units * s / slots, units * (s + 1) / slots, 0, Mg);
        }
      }
    });
  }
}

}  // namespace memlane::cpu::conv_detail
