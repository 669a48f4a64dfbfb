// The width-free half of the channel-blocked grouped conv (conv_grouped_blocked.h): block
// layout, weight packing, bands and threads. The kernels of each vector width are in
// conv_grouped_blocked_avx512.cc and conv_grouped_blocked_avx2.cc (conv_grouped_blocked_isa.h).
#include "cpu/conv_grouped_blocked.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "cpu/conv_depthwise.h"
#include "cpu/conv_grouped_blocked_isa.h"
#include "cpu/env_count.h"

namespace memlane::cpu {

namespace {

// Floats of scratch (input band + output band) a thread aims for: within L2 with room to spare.
constexpr int64_t kBandBudgetFloats = 32 * 1024;

// Groups of block gb that exist (the last block may hold fewer than G).
int64_t valid_groups(const GroupedBlockedConv& k, int64_t gb) { return std::min(k.G, k.g.group - gb * k.G); }

// Output rows [r0, r1) of group block gb of sample n, band by band.
void run_block(const GroupedBlockedConv& k, const float* X, float* Y, int64_t n, int64_t gb, int64_t r0, int64_t r1,
               float* scratch) {
  const GroupedGeom& g = k.g;
  const int64_t vg = valid_groups(k, gb);
  const float* xb = X + (n * g.C + gb * k.G * k.Cg) * g.H * g.W;
  float* yb = Y + (n * g.M + gb * k.G * k.Mg) * g.OH * g.OW;
  float* in = scratch;
  float* out = scratch + k.band_in_rows * k.Wp * k.CB;
  const int64_t L = k.lanes, chunks = (k.NV + k.isa->max_vecs - 1) / k.isa->max_vecs;
  const float* wb = k.wpack.data() + gb * k.K * k.Cg * k.NV * L;
  const float* bb = k.bpack.data() + gb * k.NV * L;
  for (int64_t oh0 = r0; oh0 < r1; oh0 += k.band) {
    const int64_t oh1 = std::min(r1, oh0 + k.band);
    k.isa->pack(k, xb, vg, oh0, oh1, in);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t v0 = k.NV * ch / chunks, v1 = k.NV * (ch + 1) / chunks;
      k.isa->compute(k, v1 - v0, in, wb + v0 * L, bb + v0 * L, oh1 - oh0, out + v0 * L);
    }
    k.isa->unpack(k, out, vg, oh0, oh1, yb);
  }
}

// Groups a block: the fewest that fill whole vectors (lanes / gcd(Mg, lanes)), doubled while
// the block has under 4 vectors and the groups past the last (zero lanes) stay within a quarter
// of the real ones. Measured per op on AVX-512 (regnet_y_400mf, 8 channels a group, 1 thread):
// 4 vectors a block (G = 8: one broadcast feeds 4 FMAs) ran 0.80-0.87x the time of 1 (G = 2) on
// 28-, 14- and 7-wide maps, but 1.08x on a 6-group stage that G = 8 pads to 8 groups. For
// 16-channel groups (regnet_x_400mf) 2 or 4 vectors a block measured 1.03-1.3x the time of 1: G
// stays 1 there. MEMLANE_CONV_GROUPED_NV=N caps the vectors at N (1: never doubled; a tuning aid).
int64_t block_groups(int64_t group, int64_t Mg, int64_t lanes) {
  static const int64_t max_vecs = env_count("MEMLANE_CONV_GROUPED_NV", 4);
  int64_t G = lanes / std::gcd<int64_t>(Mg, lanes);
  if (G == 1) return G;
  const auto padded = [&](int64_t g) { return (group + g - 1) / g * g - group; };
  while (G < lanes && 2 * G * Mg / lanes <= max_vecs && 4 * padded(2 * G) <= group) G *= 2;
  return G;
}

}  // namespace

GroupedBlockedConv::BandRows GroupedBlockedConv::zero_band_borders(int64_t oh0, int64_t oh1, float* in) const {
  const int64_t pr0 = oh0 * g.sh, rows = in_rows(oh1 - oh0);
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = in + r * Wp * CB;
    const int64_t h = pr0 + r - g.pt;
    if (h < 0 || h >= g.H) {
      std::memset(dst, 0, sizeof(float) * size_t(Wp * CB));
      continue;
    }
    std::memset(dst, 0, sizeof(float) * size_t(g.pl * CB));
    std::memset(dst + (g.pl + g.W) * CB, 0, sizeof(float) * size_t((Wp - g.pl - g.W) * CB));
  }
  const int64_t h0 = std::clamp<int64_t>(pr0 - g.pt, 0, g.H), h1 = std::clamp<int64_t>(pr0 + rows - g.pt, 0, g.H);
  return {h0, h1, in + ((h0 + g.pt - pr0) * Wp + g.pl) * CB};
}

void GroupedBlockedConv::run(const RunCtx& c, const float* X, float* Y) const {
  const int64_t items = c.batch * blocks, slot = slot_floats();
  // Fewer blocks than four a thread (a 7x7 stage of 23 blocks at batch 1 splits fine; 2 blocks
  // of a 56x56 stage do not): each block's output rows are split into pieces as well.
  const int64_t T = std::min<int64_t>(threads, c.pool->threads());
  const int64_t pieces = T < 2 || items >= 4 * T ? 1 : std::min(g.OH, (4 * T + items - 1) / items);
  const int64_t rows = (g.OH + pieces - 1) / pieces, units = items * pieces;
  const int64_t use = depthwise_threads(units, K * Cg * rows * g.OW * NV * lanes, threads, c.pool->threads());
  c.pool->parallel_for(use, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t u = units * s / use; u < units * (s + 1) / use; ++u) {
        const int64_t it = u / pieces, r0 = u % pieces * rows;
        if (r0 < g.OH) run_block(*this, X, Y, it / blocks, it % blocks, r0, std::min(g.OH, r0 + rows), c.workspace + s * slot);
      }
  });
}

// Strided depthwise convs to maps of 14x14 or less only. Measured per op against the depthwise
// kernel (1 thread, pinned, mean of 30, 2 rounds alternating, Zen 3), once that kernel's output
// passes shared their input rows (channel_cols) and stopped storing row tails with vmaskmovps:
// stride 2 to 7x7, 0.70-0.81x its time (mobilenet_v2 59 against 85 us, mnasnet0_5 36 / 47,
// efficientnet_b0 114 / 142); stride 2 to 14x14, 0.92-1.01x. Every stride-1 conv measured as
// fast or faster on the depthwise kernel, 7x7 maps included (efficientnet_b0's 5x5 on 7x7
// 157 against 168 us, mobilenet_v2's 3x3 70 / 78), and so did stride 2 to 28x28 (mnasnet0_5's
// 5x5 66 / 82, efficientnet_b0's 292 / 329). (Before those two changes this kernel took every map
// up to 14x14, and 28x28 at stride 2 or 5x5 taps.)
bool grouped_blocked_takes_depthwise(int64_t OH, int64_t OW, int64_t sh, int64_t sw) {
  static const bool on = grouped_isa_avx512() == nullptr && grouped_isa_avx2() != nullptr &&
                         std::getenv("MEMLANE_DW_PER_CHANNEL") == nullptr && std::getenv("MEMLANE_DW_NO_AVX2") == nullptr &&
                         std::getenv("MEMLANE_CONV_GROUPED_NO_AVX2") == nullptr &&
                         std::getenv("MEMLANE_CONV_NO_GROUPED") == nullptr;
  return on && sh * sw >= 4 && OH * OW <= 196;
}

std::shared_ptr<const GroupedBlockedConv> make_grouped_blocked(const GroupedGeom& g, const float* w, const float* bias,
                                                              const ConvAct& act, int threads) {
  // AVX-512's kernels where the CPU has them, else AVX2's (MEMLANE_CONV_GROUPED_NO_AVX2=1: none
  // then, so the Winograd and im2col paths take such convs group by group: A/B).
  static const bool avx2_ok = std::getenv("MEMLANE_CONV_GROUPED_NO_AVX2") == nullptr;
  const GroupedIsa* isa = grouped_isa_avx512();
  if (!isa && avx2_ok) isa = grouped_isa_avx2();
  if (!isa || std::getenv("MEMLANE_CONV_NO_GROUPED") != nullptr) return nullptr;
  if (g.group < 2 || g.C % g.group || g.M % g.group) return nullptr;
  auto k = std::make_shared<GroupedBlockedConv>();
  k->g = g;
  k->isa = isa;
  k->lanes = isa->lanes;
  k->Cg = g.C / g.group;
  k->Mg = g.M / g.group;
  k->G = block_groups(g.group, k->Mg, k->lanes);
  k->NV = k->G * k->Mg / k->lanes;
  k->blocks = (g.group + k->G - 1) / k->G;
  k->K = g.kh * g.kw;
  k->CB = k->G * k->Cg;
  k->Wp = std::max(g.pl + g.W, (g.OW - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  k->act = act;
  k->threads = std::max(1, threads);
  const int64_t G = k->G, NV = k->NV, K = k->K, Cg = k->Cg, Mg = k->Mg, L = k->lanes;
  for (int64_t s = 0; s < k->CB; ++s) k->slot_ch.push_back(int32_t(s % G * Cg + s / G));
  for (int64_t l = 0; l < NV * L; ++l) k->lane_oc.push_back(int32_t(l % L % G * Mg + l / G));
  k->wpack.assign(size_t(k->blocks * K * Cg * NV * L), 0.f);
  k->bpack.assign(size_t(k->blocks * NV * L), 0.f);
  for (int64_t gb = 0; gb < k->blocks; ++gb)
    for (int64_t l = 0; l < NV * L; ++l) {
      const int64_t grp = gb * G + l % L % G;
      if (grp >= g.group) continue;
      const int64_t oc = grp * Mg + l / G;
      if (bias) k->bpack[size_t(gb * NV * L + l)] = bias[oc];
      for (int64_t t = 0; t < K; ++t)
        for (int64_t j = 0; j < Cg; ++j)
          k->wpack[size_t(((gb * K + t) * Cg + j) * NV * L + l)] = w[(oc * Cg + j) * K + t];
    }
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) k->tap_off.push_back((i * g.dh * k->Wp + j * g.dw) * k->CB);
  // Band: as many output rows as keep the input and output bands within the budget.
  int64_t band = g.OH;
  while (band > 1 && (k->in_rows(band) * k->Wp * k->CB + band * g.OW * NV * L) > kBandBudgetFloats) --band;
  k->band = band;
  k->band_in_rows = k->in_rows(band);
  return k;
}

}  // namespace memlane::cpu
