#include "cpu/conv_winograd_avx2.h"

#include <algorithm>
#include <cstring>

#include "cpu/env_count.h"
#include "cpu/simd/avx2_gemm.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "cpu/conv_act_avx2.h"
#include "cpu/simd/lanes_avx2.h"
#define MEMLANE_WINOGRAD_AVX2 1
#endif

namespace memlane::cpu {

namespace {

// Segments a block: 3 (24 tiles) is the AVX2 sgemm's register tile width, so each of the 16
// products is one column panel; V and P of a block are 16 x 24 x (C + M) floats (192 KiB at
// 64 -> 64 channels, 768 KiB at 256 -> 256: the block's transforms stream them once, each
// product's slice stays in L1). MEMLANE_WINOGRAD_AVX2_SEGMENTS overrides (a tuning aid).
int64_t block_segments() {
  static const int64_t n = std::clamp<int64_t>(env_count("MEMLANE_WINOGRAD_AVX2_SEGMENTS", 3), 1, 64);
  return n;
}
inline int64_t block_tiles() { return 8 * block_segments(); }
// Floats between the 16 planes of V ([xi][C][tiles]) and P ([xi][M][tiles]): a cache line more
// than the plane, so that the transforms' 16 streams do not share one L1 set.
inline int64_t plane_stride(int64_t rows) { return rows * block_tiles() + 16; }
// Columns of a padded half-row (even or odd columns): every segment's 9 loads stay in the row.
inline int64_t half_row(const WinogradAvx2Geom& g) { return 8 * g.segments_a_row() + 1; }
// (paired segments: an odd tile-row count's last segment reads two rows past the map's tiles)
inline int64_t padded_rows(const WinogradAvx2Geom& g) {
  return 2 * (g.paired() ? 2 * g.segments() : g.tile_rows()) + 2;
}

}  // namespace

int64_t winograd_avx2_pad_floats(const WinogradAvx2Geom& g) { return g.C * 2 * padded_rows(g) * half_row(g); }
int64_t winograd_avx2_scratch_floats(const WinogradAvx2Geom& g) { return 16 * (plane_stride(g.C) + plane_stride(g.M)); }
int64_t winograd_avx2_blocks(const WinogradAvx2Geom& g) {
  return (g.segments() + block_segments() - 1) / block_segments();
}
// Block k's segments: the sample's shared evenly (7 in 3 blocks: 3, 2, 2, not 3, 3, 1: an
// 8-tile product keeps only 4 accumulator chains and runs at half speed).
inline int64_t block_start(const WinogradAvx2Geom& g, int64_t k) {
  return g.segments() * k / winograd_avx2_blocks(g);
}

void winograd_avx2_fill(const WinogradAvx2Geom& g, const float* x, float* pad, int64_t c0, int64_t c1) {
  const int64_t Hp = padded_rows(g), Wh = half_row(g), half = Hp * Wh;
  // Even column j of padded row r is input (r - pt, 2j - pl), odd column j input (r - pt, 2j + 1 - pl).
  // Interior columns: both inside the row; the rest (a few at each end) one at a time.
  const int64_t j_lo = std::min(Wh, (g.pl + 1) / 2);           // first j with 2j - pl >= 0
  const int64_t j_hi = std::max(j_lo, std::min(Wh, (g.W + g.pl) / 2));  // j < j_hi: 2j + 1 - pl < W
  for (int64_t c = c0; c < c1; ++c) {
    float* E = pad + c * 2 * half;
    float* O = E + half;
    const float* xc = x + c * g.H * g.W;
    for (int64_t r = 0; r < Hp; ++r) {
      float* e = E + r * Wh;
      float* o = O + r * Wh;
      const int64_t ih = r - g.pt;
      if (ih < 0 || ih >= g.H) {
        std::memset(e, 0, sizeof(float) * Wh);
        std::memset(o, 0, sizeof(float) * Wh);
        continue;
      }
      const float* xr = xc + ih * g.W - g.pl;  // xr[col] = input column col - pl
      const auto edge = [&](int64_t j) {
        const int64_t ce = 2 * j, co = 2 * j + 1;
        e[j] = ce >= g.pl && ce - g.pl < g.W ? xr[ce] : 0.f;
        o[j] = co >= g.pl && co - g.pl < g.W ? xr[co] : 0.f;
      };
      for (int64_t j = 0; j < j_lo; ++j) edge(j);
      int64_t j = j_lo;
#ifdef MEMLANE_WINOGRAD_AVX2
      // 8 even and 8 odd columns from 16 consecutive inputs: shuffle within lanes, then order
      // the 64-bit quarters.
      for (; j + 8 <= j_hi; j += 8) {
        const __m256 a = _mm256_loadu_ps(xr + 2 * j), b = _mm256_loadu_ps(xr + 2 * j + 8);
        const __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        const __m256 od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        _mm256_storeu_ps(e + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0))));
        _mm256_storeu_ps(o + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), _MM_SHUFFLE(3, 1, 2, 0))));
      }
#endif
      for (; j < j_hi; ++j) {
        e[j] = xr[2 * j];
        o[j] = xr[2 * j + 1];
      }
      for (; j < Wh; ++j) edge(j);
    }
  }
}

#ifdef MEMLANE_WINOGRAD_AVX2

namespace {

// The 16 values of V for one channel of one segment: d = the 4x4 input patch of each of the 8
// tiles (padded rows 2a..2a+3, columns 2b..2b+3 = E[b], O[b], E[b+1], O[b+1]), V = B^T d B with
// B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]. Row i of B^T d combines two input rows;
// it is formed from loads (L1) rather than kept for all four i: 16 live vectors would spill.
// E: the segment's first even column in padded row 2a; its odd plane lies `half` floats on.
// kPaired: lanes 4-7 are the first 4 tiles of the next tile row (padded rows two further on).
template <bool kPaired>
inline void input_segment(const float* E, int64_t half, int64_t Wh, float* dst, int64_t xs) {
  const auto col = [&](const float* row, int q) {
    const float* p = row + (q & 1 ? half : 0) + (q >> 1);
    if constexpr (kPaired) return _mm256_loadu2_m128(p + 2 * Wh, p);
    else return _mm256_loadu_ps(p);
  };
  for (int i = 0; i < 4; ++i) {
    // B^T rows: t_i = d[r0] op d[r1]
    static constexpr int r0[4] = {0, 1, 2, 1}, r1[4] = {2, 2, 1, 3};
    static constexpr bool add[4] = {false, true, false, false};
    const float* ra = E + r0[i] * Wh;
    const float* rb = E + r1[i] * Wh;
    __m256 t[4];
    for (int q = 0; q < 4; ++q)
      t[q] = add[i] ? _mm256_add_ps(col(ra, q), col(rb, q)) : _mm256_sub_ps(col(ra, q), col(rb, q));
    _mm256_storeu_ps(dst + (4 * i + 0) * xs, _mm256_sub_ps(t[0], t[2]));
    _mm256_storeu_ps(dst + (4 * i + 1) * xs, _mm256_add_ps(t[1], t[2]));
    _mm256_storeu_ps(dst + (4 * i + 2) * xs, _mm256_sub_ps(t[2], t[1]));
    _mm256_storeu_ps(dst + (4 * i + 3) * xs, _mm256_sub_ps(t[1], t[3]));
  }
}

using simd::first_lanes8;
using simd::store_first8;

struct Segment {
  int64_t a, b0;  // tile row, first tile (paired: rows a and a + 1, from tile 0)
};

// Where a segment's two halves (lanes 0-3 and 4-7 of each output vector, i.e. 8 output
// columns each) go in one output channel: offsets of their first row, and how many rows (0-2)
// and columns (0-8) of each lie inside the map. (Odd OH / OW: a last tile row's second row /
// a last tile's second column are outside and not stored.)
struct SegmentOut {
  int64_t at[2], rows[2], cols[2];
};
inline SegmentOut segment_out(const WinogradAvx2Geom& g, const Segment& s) {
  const auto rows = [&](int64_t a) { return std::clamp<int64_t>(g.OH - 2 * a, 0, 2); };
  const int64_t at = 2 * s.a * g.OW + 2 * s.b0;
  if (g.paired()) {
    const int64_t cols = std::min<int64_t>(8, g.OW);
    return {{at, at + 2 * g.OW}, {rows(s.a), rows(s.a + 1)}, {cols, cols}};
  }
  const int64_t cols = std::min<int64_t>(16, g.OW - 2 * s.b0);
  return {{at, at + 8}, {rows(s.a), rows(s.a)}, {std::min<int64_t>(cols, 8), std::max<int64_t>(cols - 8, 0)}};
}

// One output channel of one segment: A^T P A per tile, A^T = [[1,1,1,0],[0,1,-1,-1]], + bias;
// o[i][j] is output (i, j) of each lane's tile. The two columns of row i interleave into the
// two halves' 8 floats of output row i.
template <bool kRes>
inline void output_segment(const float* p, int64_t xs, __m256 bv, float* y, const float* res, int64_t OW,
                           const SegmentOut& so, const ConvAct& act) {
  __m256 s[4], d[4];
  for (int j = 0; j < 4; ++j) {
    const __m256 p0 = _mm256_loadu_ps(p + (0 + j) * xs), p1 = _mm256_loadu_ps(p + (4 + j) * xs);
    const __m256 p2 = _mm256_loadu_ps(p + (8 + j) * xs), p3 = _mm256_loadu_ps(p + (12 + j) * xs);
    s[j] = _mm256_add_ps(_mm256_add_ps(p0, p1), p2);
    d[j] = _mm256_sub_ps(_mm256_sub_ps(p1, p2), p3);
  }
  __m256 o[2][2];
  o[0][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), s[2]), bv);
  o[0][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s[1], s[2]), s[3]), bv);
  o[1][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(d[0], d[1]), d[2]), bv);
  o[1][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(d[1], d[2]), d[3]), bv);
  const __m256i mk[2] = {first_lanes8(so.cols[0]), first_lanes8(so.cols[1])};
  for (int i = 0; i < 2; ++i) {
    // [x0 y0 x1 y1 | x4 y4 x5 y5] and [x2 y2 x3 y3 | x6 y6 x7 y7] -> tiles 0-3, 4-7 in order
    const __m256 lo = _mm256_unpacklo_ps(o[i][0], o[i][1]), hi = _mm256_unpackhi_ps(o[i][0], o[i][1]);
    const __m256 v[2] = {_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)};
    for (int h = 0; h < 2; ++h) {
      if (i >= so.rows[h] || so.cols[h] == 0) continue;
      const int64_t at = so.at[h] + i * OW;
      __m256 x = v[h];
      if (so.cols[h] == 8) {
        if constexpr (kRes) x = _mm256_add_ps(x, _mm256_loadu_ps(res + at));
        _mm256_storeu_ps(y + at, act_vec8(x, act));
      } else {
        if constexpr (kRes) x = _mm256_add_ps(x, _mm256_maskload_ps(res + at, mk[h]));
        store_first8(y + at, so.cols[h], act_vec8(x, act));
      }
    }
  }
}

template <bool kRes>
void output_block(const WinogradAvx2Geom& g, const float* P, const Segment* sg, int64_t n, const float* bias, float* y,
                  const float* res, const ConvAct& act, int64_t m0, int64_t m1) {
  const int64_t xs = plane_stride(g.M), NB = block_tiles(), plane = g.OH * g.OW;
  SegmentOut so[64];
  for (int64_t s = 0; s < n; ++s) so[s] = segment_out(g, sg[s]);
  for (int64_t m = m0; m < m1; ++m) {
    const __m256 bv = _mm256_set1_ps(bias ? bias[m] : 0.f);
    for (int64_t s = 0; s < n; ++s)
      output_segment<kRes>(P + m * NB + 8 * s, xs, bv, y + m * plane, kRes ? res + m * plane : nullptr, g.OW, so[s], act);
  }
}

}  // namespace

bool conv_winograd_avx2_supported(const WinogradAvx2Geom& g) {
  if (!simd::have_avx2_gemm() || g.C < 8 || g.M < 1 || g.OH < 1 || g.OW < 1) return false;
  // Lanes that hold a tile: 6-8 tiles a row fill 75-100 % of one segment, 12-16 of two, ...,
  // 3-4 of a paired one; 9-11 (17- to 22-wide maps), 5 and 1-2 would waste a third or more of
  // every product.
  const int64_t tw = g.tiles_a_row();
  return g.paired() || 10 * tw >= 7 * 8 * g.segments_a_row();
}

bool winograd_avx2_weights_fit(uint64_t u_bytes) {
  static const int64_t max_u_mib = env_count("MEMLANE_WINOGRAD_AVX2_MAX_U_MIB", 4);
  return u_bytes <= uint64_t(max_u_mib) << 20;
}

bool winograd_avx2_split_channels(const WinogradAvx2Geom& g, int64_t slots) {
  return slots > 1 && winograd_avx2_blocks(g) < 4 * slots && g.M >= 16 * slots;
}

void conv_winograd_avx2(const WinogradAvx2Geom& g, const float* pad, const float* U, const float* bias, float* y,
                        const float* res, const ConvAct& act, float* scratch, int64_t k0, int64_t k1, int64_t m0,
                        int64_t m1) {
  const int64_t Wh = half_row(g), half = padded_rows(g) * Wh, NB = block_tiles();
  const int64_t xsV = plane_stride(g.C), xsP = plane_stride(g.M), per_row = g.segments_a_row();
  float* V = scratch;
  float* P = scratch + 16 * xsV;
  Segment sg[64];
  const bool paired = g.paired();
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t s0 = block_start(g, k), n = block_start(g, k + 1) - s0;
    for (int64_t s = 0; s < n; ++s)
      sg[s] = paired ? Segment{2 * (s0 + s), 0} : Segment{(s0 + s) / per_row, 8 * ((s0 + s) % per_row)};
    for (int64_t c = 0; c < g.C; ++c) {
      const float* E = pad + c * 2 * half;
      for (int64_t s = 0; s < n; ++s) {
        const float* e = E + 2 * sg[s].a * Wh + sg[s].b0;
        if (paired) input_segment<true>(e, half, Wh, V + c * NB + 8 * s, xsV);
        else input_segment<false>(e, half, Wh, V + c * NB + 8 * s, xsV);
      }
    }
    for (int xi = 0; xi < 16; ++xi)
      simd::sgemm_nn_avx2(m1 - m0, 8 * n, g.C, U + (int64_t(xi) * g.M + m0) * g.C, g.C, V + xi * xsV, NB,
                          P + xi * xsP + m0 * NB, NB);
    if (res) output_block<true>(g, P, sg, n, bias, y, res, act, m0, m1);
    else output_block<false>(g, P, sg, n, bias, y, nullptr, act, m0, m1);
  }
}

#else  // not an AVX2+FMA x86-64 build

bool conv_winograd_avx2_supported(const WinogradAvx2Geom&) { return false; }
bool winograd_avx2_weights_fit(uint64_t) { return false; }
bool winograd_avx2_split_channels(const WinogradAvx2Geom&, int64_t) { return false; }
void conv_winograd_avx2(const WinogradAvx2Geom&, const float*, const float*, const float*, float*, const float*,
                        const ConvAct&, float*, int64_t, int64_t, int64_t, int64_t) {}

#endif

}  // namespace memlane::cpu
