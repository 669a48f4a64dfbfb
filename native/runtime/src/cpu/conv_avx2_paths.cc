// ConvKernel's runner of the AVX2 Winograd kernel (conv_winograd_avx2.h), the 3x3 stride-1 path
// of CPUs without AVX-512: each sample's padded input, then its tile blocks split among the
// pool's threads, each with its own scratch.
#include <algorithm>

#include "cpu/conv_kernel.h"
#include "cpu/conv_winograd_avx2.h"

namespace memlane::cpu::conv_detail {

int64_t ConvKernel::winograd_avx2_pad_slice() const { return (winograd_avx2_pad_floats(wg) + 15) / 16 * 16; }

void ConvKernel::run_winograd_avx2(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const float* R = has_res ? res.at(c) : nullptr;
  const int64_t in_sz = g.C * g.H * g.W, out_sz = g.M * g.P();
  const int64_t scratch = winograd_avx2_scratch_floats(wg), blocks = winograd_avx2_blocks(wg);
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(threads, c.pool->threads()));
  const bool by_channels = winograd_avx2_split_channels(wg, slots);
  const ConvAct a = folded_act();
  float* pad = c.workspace;
  float* work = c.workspace + winograd_avx2_pad_slice();
  for (int64_t n = 0; n < c.batch; ++n) {
    const float* xn = X + n * in_sz;
    float* yn = Y + n * out_sz;
    const float* rn = R ? R + n * out_sz : nullptr;
    if (slots == 1) {
      winograd_avx2_fill(wg, xn, pad, 0, g.C);
      conv_winograd_avx2(wg, pad, U.data(), b, yn, rn, a, work, 0, blocks, 0, g.M);
      continue;
    }
    // (every block reads every channel: the fill completes before any block starts)
    c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) winograd_avx2_fill(wg, xn, pad, g.C * s / slots, g.C * (s + 1) / slots);
    });
    c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        float* mine = work + s * scratch;
        if (by_channels) {  // shares of 8 channels (the product's row tiles), the last one the rest
          const int64_t m0 = std::min(g.M, g.M * s / slots / 8 * 8);
          const int64_t m1 = s + 1 == slots ? g.M : std::min(g.M, g.M * (s + 1) / slots / 8 * 8);
          if (m0 < m1) conv_winograd_avx2(wg, pad, U.data(), b, yn, rn, a, mine, 0, blocks, m0, m1);
        } else {
          conv_winograd_avx2(wg, pad, U.data(), b, yn, rn, a, mine, blocks * s / slots, blocks * (s + 1) / slots, 0, g.M);
        }
      }
    });
  }
}

}  // namespace memlane::cpu::conv_detail
