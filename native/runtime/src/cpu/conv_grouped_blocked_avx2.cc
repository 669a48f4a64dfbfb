// The AVX2+FMA kernels of the channel-blocked grouped conv (conv_grouped_blocked_isa.h): 8
// lanes, 8x8 transposes between the channel planes and the packed band. The same layout as the
// AVX-512 kernels (conv_grouped_blocked_avx512.cc), half the lanes: 16 ymm registers hold the
// accumulators of at most 12 output positions x vectors, the vectors' weights and a broadcast.
// AVX2+FMA is the library's baseline (-march=x86-64-v3): no target attribute.
#include "cpu/conv_grouped_blocked.h"
#include "cpu/conv_grouped_blocked_isa.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>

#include "cpu/conv_act_avx2.h"
#include "cpu/simd/lanes_avx2.h"
#define MEMLANE_GRP_AVX2 1
#endif

namespace memlane::cpu {

#ifndef MEMLANE_GRP_AVX2
const GroupedIsa* grouped_isa_avx2() { return nullptr; }
#else

namespace {

constexpr int64_t kLanes = 8;

using simd::first_lanes8;
using simd::store_first8;

// r[k] -> r[j] lane k = old r[k] lane j: an 8x8 transpose in registers.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

// G consecutive floats repeated over the 8 lanes (lane l gets p[l % G]).
template <int G>
inline __m256 bcast(const float* p) {
  if constexpr (G == 1) {
    return _mm256_broadcast_ss(p);
  } else if constexpr (G == 2) {
    return _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(p)));
  } else if constexpr (G == 4) {
    return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  } else {
    return _mm256_loadu_ps(p);
  }
}

// N output positions x NVC vectors of output channels: bias, then for every tap and input
// channel of the group one weight load per vector and one broadcast per position. The
// accumulators are named variables, not an array: GCC kept an acc[N][NVC] array on the stack,
// a store after every FMA (perf annotate), and RegNet's 14x14 grouped convs ran at a third of
// the FMA rate.
template <int G, int NVC, int N>
void row_block(const GroupedBlockedConv& k, const float* src, const float* wp, const float* bp, float* dst) {
  static_assert(N >= 1 && N <= 8 && NVC >= 1 && NVC <= 4 && N * NVC <= 12, "more accumulators than registers");
  const __m256 z = _mm256_setzero_ps();
  const __m256 b0 = _mm256_loadu_ps(bp), b1 = NVC > 1 ? _mm256_loadu_ps(bp + 8) : z;
  const __m256 b2 = NVC > 2 ? _mm256_loadu_ps(bp + 16) : z, b3 = NVC > 3 ? _mm256_loadu_ps(bp + 24) : z;
  __m256 c00 = b0, c01 = b1, c02 = b2, c03 = b3, c10 = b0, c11 = b1, c12 = b2, c13 = b3;
  __m256 c20 = b0, c21 = b1, c22 = b2, c23 = b3, c30 = b0, c31 = b1, c32 = b2, c33 = b3;
  __m256 c40 = b0, c41 = b1, c42 = b2, c43 = b3, c50 = b0, c51 = b1, c52 = b2, c53 = b3;
  __m256 c60 = b0, c61 = b1, c62 = b2, c63 = b3, c70 = b0, c71 = b1, c72 = b2, c73 = b3;
  const int64_t step = k.g.sw * k.CB, wj = k.NV * kLanes, Cg = k.Cg;
  for (int64_t t = 0; t < k.K; ++t) {
    const float* s = src + k.tap_off[size_t(t)];
    const float* wt = wp + t * Cg * wj;
    for (int64_t j = 0; j < Cg; ++j, wt += wj, s += G) {
      const __m256 w0 = _mm256_loadu_ps(wt), w1 = NVC > 1 ? _mm256_loadu_ps(wt + 8) : z;
      const __m256 w2 = NVC > 2 ? _mm256_loadu_ps(wt + 16) : z, w3 = NVC > 3 ? _mm256_loadu_ps(wt + 24) : z;
#define MEMLANE_POS(u)                                                     \
  if constexpr (N > u) {                                                   \
    const __m256 x = bcast<G>(s + u * step);                               \
    c##u##0 = _mm256_fmadd_ps(w0, x, c##u##0);                             \
    if constexpr (NVC > 1) c##u##1 = _mm256_fmadd_ps(w1, x, c##u##1);      \
    if constexpr (NVC > 2) c##u##2 = _mm256_fmadd_ps(w2, x, c##u##2);      \
    if constexpr (NVC > 3) c##u##3 = _mm256_fmadd_ps(w3, x, c##u##3);      \
  }
      MEMLANE_POS(0) MEMLANE_POS(1) MEMLANE_POS(2) MEMLANE_POS(3)
      MEMLANE_POS(4) MEMLANE_POS(5) MEMLANE_POS(6) MEMLANE_POS(7)
#undef MEMLANE_POS
    }
  }
#define MEMLANE_OUT(u)                                                                        \
  if constexpr (N > u) {                                                                      \
    _mm256_storeu_ps(dst + u * wj, act_vec8(c##u##0, k.act));                                 \
    if constexpr (NVC > 1) _mm256_storeu_ps(dst + u * wj + 8, act_vec8(c##u##1, k.act));      \
    if constexpr (NVC > 2) _mm256_storeu_ps(dst + u * wj + 16, act_vec8(c##u##2, k.act));     \
    if constexpr (NVC > 3) _mm256_storeu_ps(dst + u * wj + 24, act_vec8(c##u##3, k.act));     \
  }
  MEMLANE_OUT(0) MEMLANE_OUT(1) MEMLANE_OUT(2) MEMLANE_OUT(3)
  MEMLANE_OUT(4) MEMLANE_OUT(5) MEMLANE_OUT(6) MEMLANE_OUT(7)
#undef MEMLANE_OUT
}

// Positions in runs of at most maxN, as even as they can be (14 -> 7 + 7): N x NVC
// accumulators + NVC weights + a broadcast within 16 registers.
template <int G, int NVC>
void compute_rows(const GroupedBlockedConv& k, const float* in, const float* wp, const float* bp, int64_t rows,
                  float* out) {
  constexpr int64_t maxN = NVC == 1 ? 8 : NVC == 2 ? 6 : NVC == 3 ? 4 : 2;
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
        case 6: if constexpr (maxN >= 6) { row_block<G, NVC, 6>(k, src, wp, bp, dst); break; } [[fallthrough]];
        case 5: if constexpr (maxN >= 5) { row_block<G, NVC, 5>(k, src, wp, bp, dst); break; } [[fallthrough]];
        case 4: if constexpr (maxN >= 4) { row_block<G, NVC, 4>(k, src, wp, bp, dst); break; } [[fallthrough]];
        case 3: if constexpr (maxN >= 3) { row_block<G, NVC, 3>(k, src, wp, bp, dst); break; } [[fallthrough]];
        case 2: row_block<G, NVC, 2>(k, src, wp, bp, dst); break;
        default: row_block<G, NVC, 1>(k, src, wp, bp, dst); break;
      }
    }
  }
}

template <int G>
void compute_nv(const GroupedBlockedConv& k, int64_t nvc, const float* in, const float* wp, const float* bp,
                int64_t rows, float* out) {
  switch (nvc) {
    case 1: return compute_rows<G, 1>(k, in, wp, bp, rows, out);
    case 2: return compute_rows<G, 2>(k, in, wp, bp, rows, out);
    case 3: return compute_rows<G, 3>(k, in, wp, bp, rows, out);
    default: return compute_rows<G, 4>(k, in, wp, bp, rows, out);
  }
}

void compute(const GroupedBlockedConv& k, int64_t nvc, const float* in, const float* wp, const float* bp, int64_t rows,
             float* out) {
  switch (k.G) {
    case 1: return compute_nv<1>(k, nvc, in, wp, bp, rows, out);
    case 2: return compute_nv<2>(k, nvc, in, wp, bp, rows, out);
    case 4: return compute_nv<4>(k, nvc, in, wp, bp, rows, out);
    default: return compute_nv<8>(k, nvc, in, wp, bp, rows, out);
  }
}

void pack(const GroupedBlockedConv& k, const float* xb, int64_t vg, int64_t oh0, int64_t oh1, float* in) {
  const GroupedGeom& g = k.g;
  const int64_t CB = k.CB, Wp = k.Wp, HW = g.H * g.W;
  const GroupedBlockedConv::BandRows br = k.zero_band_borders(oh0, oh1, in);
  const int64_t h0 = br.h0, h1 = br.h1;
  // Rows h0..h1 are contiguous in every channel plane: 8 positions x 8 slots a transpose.
  const int64_t W = g.W, skip = (Wp - W) * CB, p0 = h0 * W, p1 = h1 * W;
  float* d0 = br.first;
  for (int64_t s0 = 0; s0 < CB; s0 += kLanes) {
    const int64_t ns = std::min(kLanes, CB - s0);
    const float* src[8];
    for (int64_t s = 0; s < 8; ++s)
      src[s] = s < ns && (s0 + s) % k.G < vg ? xb + k.slot_ch[size_t(s0 + s)] * HW : nullptr;
    float* d = d0 + s0;
    int64_t w = 0;
    for (int64_t p = p0; p < p1; p += kLanes) {
      const int64_t m = std::min(kLanes, p1 - p);
      const __m256i pmask = first_lanes8(m);
      __m256 v[8];
      for (int s = 0; s < 8; ++s)
        v[s] = !src[s] ? _mm256_setzero_ps() : m == kLanes ? _mm256_loadu_ps(src[s] + p) : _mm256_maskload_ps(src[s] + p, pmask);
      transpose8(v);
      for (int64_t j = 0; j < m; ++j) {
        store_first8(d, ns, v[j]);
        d += CB;
        if (++w == W) w = 0, d += skip;
      }
    }
  }
}

void unpack(const GroupedBlockedConv& k, const float* out, int64_t vg, int64_t oh0, int64_t oh1, float* yb) {
  const int64_t count = (oh1 - oh0) * k.g.OW, OHW = k.g.OH * k.g.OW, wj = k.NV * kLanes;
  float* base = yb + oh0 * k.g.OW;
  for (int64_t vec = 0; vec < k.NV; ++vec) {
    const int32_t* oc = k.lane_oc.data() + vec * kLanes;
    for (int64_t q = 0; q < count; q += kLanes) {
      const int64_t m = std::min(kLanes, count - q);
      __m256 v[8];
      for (int64_t j = 0; j < 8; ++j) v[j] = j < m ? _mm256_loadu_ps(out + (q + j) * wj + vec * kLanes) : _mm256_setzero_ps();
      transpose8(v);
      for (int l = 0; l < 8; ++l) {
        if (l % k.G >= vg) continue;
        store_first8(base + oc[l] * OHW + q, m, v[l]);
      }
    }
  }
}

}  // namespace

const GroupedIsa* grouped_isa_avx2() {
  static const GroupedIsa isa{"grouped_blocked_avx2", kLanes, 4, pack, compute, unpack};
  return &isa;
}

#endif

}  // namespace memlane::cpu
