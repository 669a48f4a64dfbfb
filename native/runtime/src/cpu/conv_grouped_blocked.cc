#include "cpu/conv_grouped_blocked.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "cpu/conv_depthwise.h"
#include "cpu/cpu_features.h"
#include "cpu/env_count.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu/conv_act_avx512.h"
#include "cpu/transpose16_avx512.h"
#define MEMLANE_GRP_AVX512 1
#endif

namespace memlane::cpu {

#ifndef MEMLANE_GRP_AVX512
void GroupedBlockedConv::run(const RunCtx&, const float*, float*) const {}
std::shared_ptr<const GroupedBlockedConv> make_grouped_blocked(const GroupedGeom&, const float*, const float*,
                                                              const ConvAct&, int) {
  return nullptr;
}
#else

namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxVecs = 4;  // output-channel vectors one pass keeps in registers
// Floats of scratch (input band + output band) a thread aims for: within L2 with room to spare.
constexpr int64_t kBandBudgetFloats = 32 * 1024;

#define MEMLANE_GRP_TARGET __attribute__((target("avx512f")))

// G consecutive floats repeated over the 16 lanes (lane l gets p[l % G]).
template <int G>
MEMLANE_GRP_TARGET inline __m512 bcast(const float* p) {
  if constexpr (G == 1) {
    return _mm512_set1_ps(*p);
  } else if constexpr (G == 2) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return _mm512_castpd_ps(_mm512_set1_pd(d));
  } else if constexpr (G == 4) {
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  } else if constexpr (G == 8) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p))));
  } else {
    return _mm512_loadu_ps(p);
  }
}

// N output positions x NVC vectors of output channels: bias, then for every tap and input
// channel of the group one weight load per vector and one broadcast per position.
template <int G, int NVC, int N>
MEMLANE_GRP_TARGET void row_block(const GroupedBlockedConv& k, const float* src, const float* wp, const float* bp,
                                  float* dst) {
  __m512 acc[N][NVC];
  for (int v = 0; v < NVC; ++v) {
    const __m512 b = _mm512_loadu_ps(bp + v * kLanes);
    for (int u = 0; u < N; ++u) acc[u][v] = b;
  }
  const int64_t step = k.g.sw * k.CB, wj = k.NV * kLanes, Cg = k.Cg;
  for (int64_t t = 0; t < k.K; ++t) {
    const float* s = src + k.tap_off[size_t(t)];
    const float* wt = wp + t * Cg * wj;
    for (int64_t j = 0; j < Cg; ++j) {
      __m512 wv[NVC];
      for (int v = 0; v < NVC; ++v) wv[v] = _mm512_loadu_ps(wt + j * wj + v * kLanes);
      for (int u = 0; u < N; ++u) {
        const __m512 x = bcast<G>(s + u * step + j * G);
        for (int v = 0; v < NVC; ++v) acc[u][v] = _mm512_fmadd_ps(wv[v], x, acc[u][v]);
      }
    }
  }
  for (int u = 0; u < N; ++u)
    for (int v = 0; v < NVC; ++v) _mm512_storeu_ps(dst + u * wj + v * kLanes, act_vec16(acc[u][v], k.act));
}

using ComputeFn = void (*)(const GroupedBlockedConv&, const float*, const float*, const float*, int64_t, float*);

// out[r][ow][NV * 16] (vectors k0.. of it: wp, bp and out come offset) for `rows` output rows.
// Positions in runs of at most 8 (6 with 3-4 vectors: the accumulators must stay in
// registers), the runs as even as they can be (14 -> 7 + 7).
template <int G, int NVC>
MEMLANE_GRP_TARGET void compute_rows(const GroupedBlockedConv& k, const float* in, const float* wp, const float* bp,
                                     int64_t rows, float* out) {
  constexpr int64_t maxN = NVC <= 2 ? 8 : 6;
  const int64_t OW = k.g.OW, runs = (OW + maxN - 1) / maxN, wj = k.NV * kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * k.g.sh * k.Wp * k.CB;
    float* orow = out + r * OW * wj;
    for (int64_t q = 0; q < runs; ++q) {
      const int64_t a = OW * q / runs, e = OW * (q + 1) / runs;
      const float* src = row + a * k.g.sw * k.CB;
      float* dst = orow + a * wj;
      switch (e - a) {
        case 8: if constexpr (maxN >= 8) { row_block<G, NVC, 8>(k, src, wp, bp, dst); break; } [[fallthrough]];
        case 7: if constexpr (maxN >= 7) { row_block<G, NVC, 7>(k, src, wp, bp, dst); break; } [[fallthrough]];
        case 6: row_block<G, NVC, 6>(k, src, wp, bp, dst); break;
        case 5: row_block<G, NVC, 5>(k, src, wp, bp, dst); break;
        case 4: row_block<G, NVC, 4>(k, src, wp, bp, dst); break;
        case 3: row_block<G, NVC, 3>(k, src, wp, bp, dst); break;
        case 2: row_block<G, NVC, 2>(k, src, wp, bp, dst); break;
        default: row_block<G, NVC, 1>(k, src, wp, bp, dst); break;
      }
    }
  }
}

template <int G>
ComputeFn pick_nv(int64_t nvc) {
  switch (nvc) {
    case 1: return compute_rows<G, 1>;
    case 2: return compute_rows<G, 2>;
    case 3: return compute_rows<G, 3>;
    default: return compute_rows<G, 4>;
  }
}

ComputeFn pick(int64_t G, int64_t nvc) {
  switch (G) {
    case 1: return pick_nv<1>(nvc);
    case 2: return pick_nv<2>(nvc);
    case 4: return pick_nv<4>(nvc);
    case 8: return pick_nv<8>(nvc);
    default: return pick_nv<16>(nvc);
  }
}

// Groups of block gb that exist (the last block may hold fewer than G).
int64_t valid_groups(const GroupedBlockedConv& k, int64_t gb) { return std::min(k.G, k.g.group - gb * k.G); }

// in[r][q][slot] = padded x[channel of slot][oh0 * sh + r][q]: zero outside the input and in
// the slots of groups past the last.
MEMLANE_GRP_TARGET void pack(const GroupedBlockedConv& k, const float* xb, int64_t vg, int64_t oh0, int64_t oh1,
                             float* in) {
  const GroupedGeom& g = k.g;
  const int64_t CB = k.CB, Wp = k.Wp, pr0 = oh0 * g.sh, rows = k.in_rows(oh1 - oh0), HW = g.H * g.W;
  const int64_t h0 = std::clamp<int64_t>(pr0 - g.pt, 0, g.H), h1 = std::clamp<int64_t>(pr0 + rows - g.pt, 0, g.H);
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
  // Rows h0..h1 are contiguous in every channel plane: 16 positions x 16 slots a transpose.
  const int64_t W = g.W, skip = (Wp - W) * CB, p0 = h0 * W, p1 = h1 * W;
  float* d0 = in + ((h0 + g.pt - pr0) * Wp + g.pl) * CB;
  for (int64_t s0 = 0; s0 < CB; s0 += kLanes) {
    const int64_t ns = std::min(kLanes, CB - s0);
    const __mmask16 smask = __mmask16((1u << ns) - 1);
    const float* src[16];
    for (int64_t s = 0; s < 16; ++s)
      src[s] = s < ns && (s0 + s) % k.G < vg ? xb + k.slot_ch[size_t(s0 + s)] * HW : nullptr;
    float* d = d0 + s0;
    int64_t w = 0;
    for (int64_t p = p0; p < p1; p += kLanes) {
      const int64_t m = std::min(kLanes, p1 - p);
      const __mmask16 pmask = __mmask16((1u << m) - 1);
      __m512 v[16];
      for (int s = 0; s < 16; ++s)
        v[s] = !src[s] ? _mm512_setzero_ps() : m == kLanes ? _mm512_loadu_ps(src[s] + p) : _mm512_maskz_loadu_ps(pmask, src[s] + p);
      transpose16(v);
      for (int64_t j = 0; j < m; ++j) {
        _mm512_mask_storeu_ps(d, smask, v[j]);
        d += CB;
        if (++w == W) w = 0, d += skip;
      }
    }
  }
}

// y[oc of (vector, lane)][oh0 * OW + q] = out[q][vector][lane], for the lanes of existing groups.
MEMLANE_GRP_TARGET void unpack(const GroupedBlockedConv& k, const float* out, int64_t vg, int64_t oh0, int64_t oh1,
                               float* yb) {
  const int64_t count = (oh1 - oh0) * k.g.OW, OHW = k.g.OH * k.g.OW, wj = k.NV * kLanes;
  float* base = yb + oh0 * k.g.OW;
  for (int64_t vec = 0; vec < k.NV; ++vec) {
    const int32_t* oc = k.lane_oc.data() + vec * kLanes;
    for (int64_t q = 0; q < count; q += kLanes) {
      const int64_t m = std::min(kLanes, count - q);
      __m512 v[16];
      for (int64_t j = 0; j < 16; ++j) v[j] = j < m ? _mm512_loadu_ps(out + (q + j) * wj + vec * kLanes) : _mm512_setzero_ps();
      transpose16(v);
      const __mmask16 mask = __mmask16((1u << m) - 1);
      for (int l = 0; l < 16; ++l)
        if (l % k.G < vg) _mm512_mask_storeu_ps(base + oc[l] * OHW + q, mask, v[l]);
    }
  }
}

// Output rows [r0, r1) of group block gb of sample n, band by band.
void run_block(const GroupedBlockedConv& k, const float* X, float* Y, int64_t n, int64_t gb, int64_t r0, int64_t r1,
               float* scratch) {
  const GroupedGeom& g = k.g;
  const int64_t vg = valid_groups(k, gb);
  const float* xb = X + (n * g.C + gb * k.G * k.Cg) * g.H * g.W;
  float* yb = Y + (n * g.M + gb * k.G * k.Mg) * g.OH * g.OW;
  float* in = scratch;
  float* out = scratch + k.band_in_rows * k.Wp * k.CB;
  const int64_t chunks = (k.NV + kMaxVecs - 1) / kMaxVecs;
  const float* wb = k.wpack.data() + gb * k.K * k.Cg * k.NV * kLanes;
  const float* bb = k.bpack.data() + gb * k.NV * kLanes;
  for (int64_t oh0 = r0; oh0 < r1; oh0 += k.band) {
    const int64_t oh1 = std::min(r1, oh0 + k.band);
    pack(k, xb, vg, oh0, oh1, in);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t v0 = k.NV * ch / chunks, v1 = k.NV * (ch + 1) / chunks;
      pick(k.G, v1 - v0)(k, in, wb + v0 * kLanes, bb + v0 * kLanes, oh1 - oh0, out + v0 * kLanes);
    }
    unpack(k, out, vg, oh0, oh1, yb);
  }
}

// Groups a block: the fewest that fill whole vectors (16 / gcd(Mg, 16)), doubled while the
// block has under 4 vectors and the groups past the last (zero lanes) stay within a quarter of
// the real ones. Measured per op (regnet_y_400mf, 8 channels a group, 1 thread): 4 vectors a
// block (G = 8: one broadcast feeds 4 FMAs) ran 0.80-0.87x the time of 1 (G = 2) on 28-, 14- and
// 7-wide maps, but 1.08x on a 6-group stage that G = 8 pads to 8 groups. For 16-channel groups
// (regnet_x_400mf) 2 or 4 vectors a block measured 1.03-1.3x the time of 1: G stays 1 there.
// MEMLANE_CONV_GROUPED_NV=N caps the vectors at N (1: never doubled; a tuning aid).
int64_t block_groups(int64_t group, int64_t Mg) {
  static const int64_t max_vecs = env_count("MEMLANE_CONV_GROUPED_NV", 4);
  int64_t G = kLanes / std::gcd<int64_t>(Mg, kLanes);
  if (G == 1) return G;
  const auto padded = [&](int64_t g) { return (group + g - 1) / g * g - group; };
  while (G < kLanes && 2 * G * Mg / kLanes <= max_vecs && 4 * padded(2 * G) <= group) G *= 2;
  return G;
}

}  // namespace

void GroupedBlockedConv::run(const RunCtx& c, const float* X, float* Y) const {
  const int64_t items = c.batch * blocks, slot = slot_floats();
  // Fewer blocks than four a thread (a 7x7 stage of 23 blocks at batch 1 splits fine; 2 blocks
  // of a 56x56 stage do not): each block's output rows are split into pieces as well.
  const int64_t T = std::min<int64_t>(threads, c.pool->threads());
  const int64_t pieces = T < 2 || items >= 4 * T ? 1 : std::min(g.OH, (4 * T + items - 1) / items);
  const int64_t rows = (g.OH + pieces - 1) / pieces, units = items * pieces;
  const int64_t use = depthwise_threads(units, K * Cg * rows * g.OW * NV * kLanes, threads, c.pool->threads());
  c.pool->parallel_for(use, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t u = units * s / use; u < units * (s + 1) / use; ++u) {
        const int64_t it = u / pieces, r0 = u % pieces * rows;
        if (r0 < g.OH) run_block(*this, X, Y, it / blocks, it % blocks, r0, std::min(g.OH, r0 + rows), c.workspace + s * slot);
      }
  });
}

std::shared_ptr<const GroupedBlockedConv> make_grouped_blocked(const GroupedGeom& g, const float* w, const float* bias,
                                                              const ConvAct& act, int threads) {
  if (!use_avx512f() || std::getenv("MEMLANE_CONV_NO_GROUPED") != nullptr) return nullptr;
  if (g.group < 2 || g.C % g.group || g.M % g.group) return nullptr;
  auto k = std::make_shared<GroupedBlockedConv>();
  k->g = g;
  k->Cg = g.C / g.group;
  k->Mg = g.M / g.group;
  k->G = block_groups(g.group, k->Mg);
  k->NV = k->G * k->Mg / kLanes;
  k->blocks = (g.group + k->G - 1) / k->G;
  k->K = g.kh * g.kw;
  k->CB = k->G * k->Cg;
  k->Wp = std::max(g.pl + g.W, (g.OW - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  k->act = act;
  k->threads = std::max(1, threads);
  const int64_t G = k->G, NV = k->NV, K = k->K, Cg = k->Cg, Mg = k->Mg;
  for (int64_t s = 0; s < k->CB; ++s) k->slot_ch.push_back(int32_t(s % G * Cg + s / G));
  for (int64_t l = 0; l < NV * kLanes; ++l) k->lane_oc.push_back(int32_t(l % kLanes % G * Mg + l / G));
  k->wpack.assign(size_t(k->blocks * K * Cg * NV * kLanes), 0.f);
  k->bpack.assign(size_t(k->blocks * NV * kLanes), 0.f);
  for (int64_t gb = 0; gb < k->blocks; ++gb)
    for (int64_t l = 0; l < NV * kLanes; ++l) {
      const int64_t grp = gb * G + l % kLanes % G;
      if (grp >= g.group) continue;
      const int64_t oc = grp * Mg + l / G;
      if (bias) k->bpack[size_t(gb * NV * kLanes + l)] = bias[oc];
      for (int64_t t = 0; t < K; ++t)
        for (int64_t j = 0; j < Cg; ++j)
          k->wpack[size_t(((gb * K + t) * Cg + j) * NV * kLanes + l)] = w[(oc * Cg + j) * K + t];
    }
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) k->tap_off.push_back((i * g.dh * k->Wp + j * g.dw) * k->CB);
  // Band: as many output rows as keep the input and output bands within the budget.
  int64_t band = g.OH;
  while (band > 1 && (k->in_rows(band) * k->Wp * k->CB + band * g.OW * NV * kLanes) > kBandBudgetFloats) --band;
  k->band = band;
  k->band_in_rows = k->in_rows(band);
  return k;
}

#endif

}  // namespace memlane::cpu
