// The AVX-512 kernels of the channel-blocked grouped conv (conv_grouped_blocked_isa.h): 16
// lanes, 16x16 transposes between the channel planes and the packed band.
#include "cpu/conv_grouped_blocked.h"
#include "cpu/conv_grouped_blocked_isa.h"
#include "cpu/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/conv_act_avx512.h"
#include "cpu/transpose16_avx512.h"
#define MEMLANE_GRP_AVX512 1
#endif

namespace memlane::cpu {

#ifndef MEMLANE_GRP_AVX512
const GroupedIsa* grouped_isa_avx512() { return nullptr; }
#else

namespace {

constexpr int64_t kLanes = 16;

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
MEMLANE_GRP_TARGET void compute_nv(const GroupedBlockedConv& k, int64_t nvc, const float* in, const float* wp, const float* bp,
                int64_t rows, float* out) {
  switch (nvc) {
    case 1: return compute_rows<G, 1>(k, in, wp, bp, rows, out);
    case 2: return compute_rows<G, 2>(k, in, wp, bp, rows, out);
    case 3: return compute_rows<G, 3>(k, in, wp, bp, rows, out);
    default: return compute_rows<G, 4>(k, in, wp, bp, rows, out);
  }
}

MEMLANE_GRP_TARGET void compute(const GroupedBlockedConv& k, int64_t nvc, const float* in, const float* wp, const float* bp, int64_t rows,
             float* out) {
  switch (k.G) {
    case 1: return compute_nv<1>(k, nvc, in, wp, bp, rows, out);
    case 2: return compute_nv<2>(k, nvc, in, wp, bp, rows, out);
    case 4: return compute_nv<4>(k, nvc, in, wp, bp, rows, out);
    case 8: return compute_nv<8>(k, nvc, in, wp, bp, rows, out);
    default: return compute_nv<16>(k, nvc, in, wp, bp, rows, out);
  }
}

MEMLANE_GRP_TARGET void pack(const GroupedBlockedConv& k, const float* xb, int64_t vg, int64_t oh0, int64_t oh1,
                             float* in) {
  const GroupedGeom& g = k.g;
  const int64_t CB = k.CB, Wp = k.Wp, HW = g.H * g.W;
  const GroupedBlockedConv::BandRows br = k.zero_band_borders(oh0, oh1, in);
  const int64_t h0 = br.h0, h1 = br.h1;
  // Rows h0..h1 are contiguous in every channel plane: 16 positions x 16 slots a transpose.
  const int64_t W = g.W, skip = (Wp - W) * CB, p0 = h0 * W, p1 = h1 * W;
  float* d0 = br.first;
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

}  // namespace

const GroupedIsa* grouped_isa_avx512() {
  static const GroupedIsa isa{"grouped_blocked", kLanes, 4, pack, compute, unpack};
  return use_avx512f() ? &isa : nullptr;
}

#endif

}  // namespace memlane::cpu
