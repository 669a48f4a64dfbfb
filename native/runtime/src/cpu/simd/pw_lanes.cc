// Pointwise conv with the output channels in the lanes (see pw_lanes.h).
#include "cpu/simd/pw_lanes.h"

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "cpu/conv_act_avx512.h"
#include "cpu/simd/lanes_avx2.h"

namespace memlane::cpu::simd {

PwLanesWeights pw_lanes_pack(const float* w, const float* b, int64_t M, int64_t C) {
  PwLanesWeights pw;
  pw.M = M;
  pw.C = C;
  const int64_t L = kPwLanesPanel;
  pw.w.assign(uint64_t(pw.panels() * C * L), 0.f);
  pw.b.assign(uint64_t(pw.panels() * L), 0.f);
  for (int64_t m = 0; m < M; ++m) {
    float* dst = pw.w.data() + (m / L) * C * L + m % L;
    for (int64_t c = 0; c < C; ++c) dst[c * L] = w[m * C + c];
    if (b) pw.b[uint64_t(m)] = b[m];
  }
  return pw;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define AVX512 __attribute__((target("avx512f")))

namespace {

// The upper 8 lanes (AVX512F has no extractf32x8; the 64-bit form moves the same bits).
AVX512 inline __m256 upper8(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// The fused residual of a tile (pw_lanes' R): its rows laid out as y's, and the Relu that
// follows the Add. Null `r`: none.
struct Residual {
  const float* r;
  bool relu;
};

// Rows r0..r7 (pixel r, 8 channels each) to channel rows of 8 pixels, stored at y + j * P for
// the channels j < mc, the first `pix` pixels of each; with a residual, its row (same place as
// y's, so it may be y: read before the store) added and the Relu applied first.
AVX512 inline void transpose_store(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 r4, __m256 r5,
                                           __m256 r6, __m256 r7, float* y, int64_t P, int64_t mc, int pix,
                                           Residual res) {
  __m256 o[8] = {r0, r1, r2, r3, r4, r5, r6, r7};
  transpose8x8(o);
  const int64_t n = std::min<int64_t>(8, mc);
  if (pix == 8) {
    if (res.r)
      for (int64_t j = 0; j < n; ++j) {
        o[j] = _mm256_add_ps(o[j], _mm256_loadu_ps(res.r + j * P));
        if (res.relu) o[j] = _mm256_max_ps(o[j], _mm256_setzero_ps());
      }
    for (int64_t j = 0; j < n; ++j) _mm256_storeu_ps(y + j * P, o[j]);
    return;
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(pix), lane);
  if (res.r)
    for (int64_t j = 0; j < n; ++j) {
      o[j] = _mm256_add_ps(o[j], _mm256_maskload_ps(res.r + j * P, mask));
      if (res.relu) o[j] = _mm256_max_ps(o[j], _mm256_setzero_ps());
    }
  for (int64_t j = 0; j < n; ++j) _mm256_maskstore_ps(y + j * P, mask, o[j]);
}

// MR pixels (x = X + p0, pixel r at x[r], channel c at x + c * P) x 16 * NV channels of the
// panel (wp: [C][32], bp: 32), stored at y = Y + m0 * P + p0 for the first mc channels. NV = 1
// for a last panel of at most 16 channels (half the multiply-adds of a zero-padded 32). PF:
// also prefetch the panel at pf (the next one, [C][32]) into L2, a row each step. res: the
// residual at y's place (act is then kNone: res.relu comes after the Add).
// kIn / kOut: a slice of C (a K block, `pixels_kblocked`): the sums so far are read from /
// the raw sums written to acc ([MR][32]) instead of starting at zero / being finished and
// stored; x and wp then point at the slice's first channel and C is the slice's length.
template <int MR, int NV, bool PF, bool kIn = false, bool kOut = false>
AVX512 void tile(int64_t C, const float* x, int64_t P, const float* wp, const float* bp, float* y, int64_t mc,
                         const ConvAct& act, const float* pf, Residual res, float* acc = nullptr) {
  // Named accumulators (an array of them is kept on the stack by GCC); rows past MR stay zero.
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  __m512 c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  if constexpr (kIn) {
#define MEMLANE_LOAD(r)                                                  \
    if constexpr (MR > r) {                                              \
      c##r##0 = _mm512_load_ps(acc + r * kPwLanesPanel);                 \
      if constexpr (NV > 1) c##r##1 = _mm512_load_ps(acc + r * kPwLanesPanel + 16); \
    }
    MEMLANE_LOAD(0) MEMLANE_LOAD(1) MEMLANE_LOAD(2) MEMLANE_LOAD(3)
    MEMLANE_LOAD(4) MEMLANE_LOAD(5) MEMLANE_LOAD(6) MEMLANE_LOAD(7)
#undef MEMLANE_LOAD
  }
  for (int64_t c = 0; c < C; ++c) {
    const __m512 b0 = _mm512_loadu_ps(wp + c * kPwLanesPanel);
    const __m512 b1 = NV > 1 ? _mm512_loadu_ps(wp + c * kPwLanesPanel + 16) : b0;
    const float* xc = x + c * P;
    if constexpr (PF) {
      _mm_prefetch(reinterpret_cast<const char*>(pf + c * kPwLanesPanel), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(pf + c * kPwLanesPanel + 16), _MM_HINT_T1);
    }
#define MEMLANE_ROW(r)                                 \
    if constexpr (MR > r) {                            \
      const __m512 av = _mm512_set1_ps(xc[r]);         \
      c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);      \
      if constexpr (NV > 1) c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1); \
    }
    MEMLANE_ROW(0) MEMLANE_ROW(1) MEMLANE_ROW(2) MEMLANE_ROW(3)
    MEMLANE_ROW(4) MEMLANE_ROW(5) MEMLANE_ROW(6) MEMLANE_ROW(7)
#undef MEMLANE_ROW
  }
  if constexpr (kOut) {
#define MEMLANE_SAVE(r)                                                  \
    if constexpr (MR > r) {                                              \
      _mm512_store_ps(acc + r * kPwLanesPanel, c##r##0);                 \
      if constexpr (NV > 1) _mm512_store_ps(acc + r * kPwLanesPanel + 16, c##r##1); \
    }
    MEMLANE_SAVE(0) MEMLANE_SAVE(1) MEMLANE_SAVE(2) MEMLANE_SAVE(3)
    MEMLANE_SAVE(4) MEMLANE_SAVE(5) MEMLANE_SAVE(6) MEMLANE_SAVE(7)
#undef MEMLANE_SAVE
    return;
  }
  // Bias after the sum (the order of the other paths), then the activation, in registers.
  const __m512 bv0 = _mm512_loadu_ps(bp), bv1 = _mm512_loadu_ps(bp + 16);
#define MEMLANE_FIN(r)                                                    \
  if constexpr (MR > r) {                                                 \
    c##r##0 = act_vec16(_mm512_add_ps(c##r##0, bv0), act);                 \
    if constexpr (NV > 1) c##r##1 = act_vec16(_mm512_add_ps(c##r##1, bv1), act); \
  }
  MEMLANE_FIN(0) MEMLANE_FIN(1) MEMLANE_FIN(2) MEMLANE_FIN(3)
  MEMLANE_FIN(4) MEMLANE_FIN(5) MEMLANE_FIN(6) MEMLANE_FIN(7)
#undef MEMLANE_FIN
#define MEMLANE_LO(h) _mm512_castps512_ps256(c0##h), _mm512_castps512_ps256(c1##h), _mm512_castps512_ps256(c2##h), \
    _mm512_castps512_ps256(c3##h), _mm512_castps512_ps256(c4##h), _mm512_castps512_ps256(c5##h),                  \
    _mm512_castps512_ps256(c6##h), _mm512_castps512_ps256(c7##h)
#define MEMLANE_HI(h) upper8(c0##h), upper8(c1##h), upper8(c2##h), upper8(c3##h), upper8(c4##h), upper8(c5##h), \
    upper8(c6##h), upper8(c7##h)
  // the residual's rows for channels 8k.. of the tile
  auto at = [&](int64_t k) { return Residual{res.r ? res.r + k * 8 * P : nullptr, res.relu}; };
  transpose_store(MEMLANE_LO(0), y, P, mc, MR, at(0));
  if (mc > 8) transpose_store(MEMLANE_HI(0), y + 8 * P, P, mc - 8, MR, at(1));
  if constexpr (NV > 1) {
    if (mc > 16) transpose_store(MEMLANE_LO(1), y + 16 * P, P, mc - 16, MR, at(2));
    if (mc > 24) transpose_store(MEMLANE_HI(1), y + 24 * P, P, mc - 24, MR, at(3));
  }
#undef MEMLANE_LO
#undef MEMLANE_HI
}

// The panel's tiles of 8 pixels, then the tail. The first tile prefetches the next panel (pf,
// null for the last): a batch runs one sample through the whole network at a time
// (cpu_backend.cc's 256 KiB chunks), so a layer's W is out of L2 again at every sample, and
// the first tile of each panel waited on its 128 bytes a row from L3 / DRAM (regnet_x_400mf's
// 400 -> 400 on 7x7: 144 us warm, 183-208 us with W evicted; 163-175 us with this prefetch).
template <int NV>
AVX512 void pixels(int64_t C, const float* X, int64_t P, const float* wp, const float* bp, float* y, int64_t mc,
                           const ConvAct& act, int64_t p0, int64_t p1, const float* pf, Residual res) {
  int64_t p = p0;
  auto rp = [&] { return Residual{res.r ? res.r + p : nullptr, res.relu}; };
  if (pf && p + 8 <= p1) {
    tile<8, NV, true>(C, X + p, P, wp, bp, y + p, mc, act, pf, rp());
    p += 8;
  }
  for (; p + 8 <= p1; p += 8) tile<8, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp());
  switch (p1 - p) {
    case 7: tile<7, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    case 6: tile<6, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    case 5: tile<5, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    case 4: tile<4, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    case 3: tile<3, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    case 2: tile<2, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    case 1: tile<1, NV, false>(C, X + p, P, wp, bp, y + p, mc, act, nullptr, rp()); break;
    default: break;
  }
}

// One K block of every tile of [p0, p1) (kIn: not the first block; kOut: not the last).
// pf (nullable): the next block's slice, prefetched into L2 by the first 8-pixel tile.
template <int NV, bool kIn, bool kOut>
AVX512 void kblock_tiles(int64_t kc, const float* X, int64_t P, const float* wp, const float* bp, float* y,
                         int64_t mc, const ConvAct& act, int64_t p0, int64_t p1, Residual res, float* acc,
                         const float* pf) {
  for (int64_t p = p0; p < p1; p += 8) {
    float* a = acc + (p - p0) * kPwLanesPanel;
    const Residual rp{res.r ? res.r + p : nullptr, res.relu};
    if (pf && p == p0 && p1 - p >= 8) {
      tile<8, NV, true, kIn, kOut>(kc, X + p, P, wp, bp, y + p, mc, act, pf, rp, a);
      continue;
    }
    switch (std::min<int64_t>(8, p1 - p)) {
#define MEMLANE_CASE(n) \
      case n: tile<n, NV, false, kIn, kOut>(kc, X + p, P, wp, bp, y + p, mc, act, nullptr, rp, a); break;
      MEMLANE_CASE(8) MEMLANE_CASE(7) MEMLANE_CASE(6) MEMLANE_CASE(5)
      MEMLANE_CASE(4) MEMLANE_CASE(3) MEMLANE_CASE(2) MEMLANE_CASE(1)
#undef MEMLANE_CASE
      default: break;
    }
  }
}

// The K-block sweep of pixels_kblocked and pair_pixels: pixel blocks of kPwLanesKBlockPixels,
// each over C in blocks of at most kPwLanesKBlock, calling tiles(kIn, kOut, n, xk, wk, q0, q1,
// pf) for each (kIn / kOut: std::bool_constant, as tile()'s; wk the block's slice of the panel
// at wp); pf the slice to prefetch next (a panel's slices are contiguous: the next one starts
// where this one ends), after the last block the next panel's (`next`), null when off.
template <class Tiles>
AVX512 void kblock_sweep(int64_t C, const float* X, int64_t P, const float* wp, int64_t p0, int64_t p1,
                         const float* next, const Tiles& tiles) {
  static const bool pf_on = std::getenv("MEMLANE_PW_LANES_NO_PF") == nullptr;
  const int64_t blocks = (C + kPwLanesKBlock - 1) / kPwLanesKBlock, kc = (C + blocks - 1) / blocks;
  for (int64_t q0 = p0; q0 < p1; q0 += kPwLanesKBlockPixels) {
    const int64_t q1 = std::min(p1, q0 + kPwLanesKBlockPixels);
    for (int64_t k0 = 0; k0 < C; k0 += kc) {
      const int64_t n = std::min(kc, C - k0);
      const float* xk = X + k0 * P;
      const float* wk = wp + k0 * kPwLanesPanel;
      const bool first = k0 == 0, last = k0 + n == C;
      const float* pf = !pf_on ? nullptr : !last ? wk + n * kPwLanesPanel : q1 == p1 ? next : wp;
      if (first) tiles(std::false_type{}, std::true_type{}, n, xk, wk, q0, q1, pf);
      else if (!last) tiles(std::true_type{}, std::true_type{}, n, xk, wk, q0, q1, pf);
      else tiles(std::true_type{}, std::false_type{}, n, xk, wk, q0, q1, pf);
    }
  }
}

// The panel in K blocks of at most kPwLanesKBlock channels, each over every tile of [p0, p1)
// before the next: a [C][32] panel of more than 128 channels (16 KiB; regnet's 400 -> 400 is
// 51 KiB, squeezenet's 512 -> 1000 classifier 64 KiB, past L1's 48) was read from L2 again by
// each 8-pixel tile; a block's slice stays in L1 across the tiles, and the tiles' running sums
// wait in `acc` between blocks. Each output's sum runs over C in the same order as unblocked,
// so the floats are the same.
template <int NV>
AVX512 void pixels_kblocked(int64_t C, const float* X, int64_t P, const float* wp, const float* bp, float* y,
                            int64_t mc, const ConvAct& act, int64_t p0, int64_t p1, Residual res,
                            const float* next_panel) {
  alignas(64) float acc[kPwLanesKBlockPixels * kPwLanesPanel];
  kblock_sweep(C, X, P, wp, p0, p1, next_panel,
               [&](auto in, auto out, int64_t n, const float* xk, const float* wk, int64_t q0, int64_t q1,
                   const float* pf) {
                 kblock_tiles<NV, decltype(in)::value, decltype(out)::value>(n, xk, P, wk, bp, y, mc, act, q0, q1, res,
                                                                           acc, pf);
               });
}

// tile() over two panels at once: MR pixels (up to kWidePixels) x 64 channels (wp: the first
// panel's [C][32], wp + pstride the second's; bp: the pair's 64 biases, contiguous in pw.b),
// stored for the first mc channels (33-64). 24 accumulators take 6 broadcasts and 4 loads a
// channel where the 8 x 32 tile takes 8 and 2 for 16 multiply-adds: the shape of
// gemm_panels_gather's wide tile, which ran resnet18's deep convs in 0.8-0.9x the time of its
// 8 x 32 one on an Intel Xeon. (7 pixels would need 33 registers: GCC spills one sum.)
// kIn / kOut as tile()'s, with acc [MR][64].
inline constexpr int kWidePixels = 6;

template <int MR, bool PF, bool kIn = false, bool kOut = false>
AVX512 void tile_wide(int64_t C, const float* x, int64_t P, const float* wp, int64_t pstride, const float* bp,
                      float* y, int64_t mc, const ConvAct& act, const float* pf, Residual res, float* acc = nullptr) {
  constexpr int64_t W = 2 * kPwLanesPanel;
  __m512 c[MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) c[r][v] = kIn ? _mm512_load_ps(acc + r * W + 16 * v) : _mm512_setzero_ps();
  const float* wq = wp + pstride;
  for (int64_t k = 0; k < C; ++k) {
    const __m512 b0 = _mm512_loadu_ps(wp + k * kPwLanesPanel), b1 = _mm512_loadu_ps(wp + k * kPwLanesPanel + 16);
    const __m512 b2 = _mm512_loadu_ps(wq + k * kPwLanesPanel), b3 = _mm512_loadu_ps(wq + k * kPwLanesPanel + 16);
    if constexpr (PF) {
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kPwLanesPanel), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kPwLanesPanel + pstride), _MM_HINT_T1);
    }
    const float* xk = x + k * P;
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(xk[r]);
      c[r][0] = _mm512_fmadd_ps(av, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(av, b1, c[r][1]);
      c[r][2] = _mm512_fmadd_ps(av, b2, c[r][2]);
      c[r][3] = _mm512_fmadd_ps(av, b3, c[r][3]);
    }
  }
  if constexpr (kOut) {
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) _mm512_store_ps(acc + r * W + 16 * v, c[r][v]);
    return;
  }
  // Bias after the sum, then the activation, in registers; rows past MR are zero and not stored.
  __m512 f[8][4];
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) {
    const __m512 bv = _mm512_loadu_ps(bp + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) f[r][v] = r < MR ? act_vec16(_mm512_add_ps(c[r < MR ? r : 0][v], bv), act) : _mm512_setzero_ps();
  }
  auto at = [&](int64_t k) { return Residual{res.r ? res.r + k * 8 * P : nullptr, res.relu}; };
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) {
    if (mc <= 16 * v) break;
    transpose_store(_mm512_castps512_ps256(f[0][v]), _mm512_castps512_ps256(f[1][v]), _mm512_castps512_ps256(f[2][v]),
                    _mm512_castps512_ps256(f[3][v]), _mm512_castps512_ps256(f[4][v]), _mm512_castps512_ps256(f[5][v]),
                    _mm512_castps512_ps256(f[6][v]), _mm512_castps512_ps256(f[7][v]), y + 16 * v * P, P, mc - 16 * v, MR,
                    at(2 * v));
    if (mc > 16 * v + 8)
      transpose_store(upper8(f[0][v]), upper8(f[1][v]), upper8(f[2][v]), upper8(f[3][v]), upper8(f[4][v]),
                      upper8(f[5][v]), upper8(f[6][v]), upper8(f[7][v]), y + (16 * v + 8) * P, P, mc - 16 * v - 8, MR,
                      at(2 * v + 1));
  }
}

// One K block (or the whole of C) of the pair's tiles over [p0, p1): tiles of kWidePixels, the
// first prefetching pf (nullable) into L2, then the tail.
template <bool kIn, bool kOut>
AVX512 void wide_tiles(int64_t kc, const float* X, int64_t P, const float* wp, int64_t pstride, const float* bp,
                       float* y, int64_t mc, const ConvAct& act, int64_t p0, int64_t p1, Residual res, float* acc,
                       const float* pf) {
  constexpr int64_t W = 2 * kPwLanesPanel;
  for (int64_t p = p0; p < p1; p += kWidePixels) {
    float* a = acc ? acc + (p - p0) * W : nullptr;
    const Residual rp{res.r ? res.r + p : nullptr, res.relu};
    if (pf && p == p0 && p1 - p >= kWidePixels) {
      tile_wide<kWidePixels, true, kIn, kOut>(kc, X + p, P, wp, pstride, bp, y + p, mc, act, pf, rp, a);
      continue;
    }
    switch (std::min<int64_t>(kWidePixels, p1 - p)) {
#define MEMLANE_CASE(n) \
      case n: tile_wide<n, false, kIn, kOut>(kc, X + p, P, wp, pstride, bp, y + p, mc, act, nullptr, rp, a); break;
      MEMLANE_CASE(6) MEMLANE_CASE(5) MEMLANE_CASE(4) MEMLANE_CASE(3) MEMLANE_CASE(2) MEMLANE_CASE(1)
#undef MEMLANE_CASE
      default: break;
    }
  }
}

// pixels_kblocked for a pair of panels: each K block's slices of both (2 x 16 KiB) stay in L1
// across the tiles, the running sums in acc ([pixels][64]) between blocks.
AVX512 void pair_pixels(int64_t C, const float* X, int64_t P, const float* wp, int64_t pstride, const float* bp,
                        float* y, int64_t mc, const ConvAct& act, int64_t p0, int64_t p1, Residual res,
                        const float* next_pair) {
  static const bool kblocks = std::getenv("MEMLANE_PW_LANES_NO_KBLOCK") == nullptr;
  if (!kblocks || C <= kPwLanesKBlock) {
    wide_tiles<false, false>(C, X, P, wp, pstride, bp, y, mc, act, p0, p1, res, nullptr, next_pair);
    return;
  }
  alignas(64) float acc[kPwLanesKBlockPixels * 2 * kPwLanesPanel];
  kblock_sweep(C, X, P, wp, p0, p1, next_pair,
               [&](auto in, auto out, int64_t n, const float* xk, const float* wk, int64_t q0, int64_t q1,
                   const float* pf) {
                 wide_tiles<decltype(in)::value, decltype(out)::value>(n, xk, P, wk, pstride, bp, y, mc, act, q0, q1,
                                                                       res, acc, pf);
               });
}

// One panel's channels (mc of them, C input channels from wp's rows) over pixels [p0, p1): in
// K blocks where C is larger than one.
AVX512 void one_panel(int64_t C, const float* X, int64_t P, const float* wp, const float* bp, float* y, int64_t mc,
                      const ConvAct& act, int64_t p0, int64_t p1, Residual res, const float* pf) {
  static const bool kblocks = std::getenv("MEMLANE_PW_LANES_NO_KBLOCK") == nullptr;
  if (kblocks && C > kPwLanesKBlock && p1 - p0 > 8) {
    if (mc > 16) pixels_kblocked<2>(C, X, P, wp, bp, y, mc, act, p0, p1, res, pf);
    else pixels_kblocked<1>(C, X, P, wp, bp, y, mc, act, p0, p1, res, pf);
    return;
  }
  if (mc > 16) pixels<2>(C, X, P, wp, bp, y, mc, act, p0, p1, pf, res);
  else pixels<1>(C, X, P, wp, bp, y, mc, act, p0, p1, pf, res);
}

}  // namespace

AVX512 void pw_lanes(const PwLanesWeights& pw, int64_t panel, const float* X, float* Y, int64_t P, int64_t p0,
                             int64_t p1, const ConvAct& act, const float* R) {
  const int64_t C = pw.C, m0 = panel * kPwLanesPanel, mc = std::min(kPwLanesPanel, pw.M - m0);
  const float* wp = pw.w.data() + panel * C * kPwLanesPanel;
  const float* bp = pw.b.data() + m0;
  float* y = Y + m0 * P;
  const float* pf = panel + 1 < pw.panels() ? wp + C * kPwLanesPanel : nullptr;
  // With a residual the tile adds only the bias in its 16-lane registers; the Add and its
  // Relu follow on the transposed rows (they are laid out as Y).
  const Residual res{R ? R + m0 * P : nullptr, R && act.kind == ConvAct::kRelu};
  one_panel(C, X, P, wp, bp, y, mc, R ? ConvAct{} : act, p0, p1, res, pf);
}

AVX512 void pw_lanes_pair(const PwLanesWeights& pw, int64_t panel, const float* X, float* Y, int64_t P, int64_t p0,
                          int64_t p1, const ConvAct& act, const float* R) {
  const int64_t C = pw.C, m0 = panel * kPwLanesPanel, mc = std::min(2 * kPwLanesPanel, pw.M - m0);
  const int64_t pstride = C * kPwLanesPanel;
  const float* wp = pw.w.data() + panel * pstride;
  const float* next = panel + 3 < pw.panels() ? wp + 2 * pstride : nullptr;
  const Residual res{R ? R + m0 * P : nullptr, R && act.kind == ConvAct::kRelu};
  pair_pixels(C, X, P, wp, pstride, pw.b.data() + m0, Y + m0 * P, mc, R ? ConvAct{} : act, p0, p1, res, next);
}

AVX512 void pw_lanes_partial(const PwLanesWeights& pw, const float* X, float* Y, int64_t P, int64_t c0, int64_t c1) {
  alignas(64) static const float zeros[2 * kPwLanesPanel] = {};
  const int64_t C = pw.C, n = c1 - c0, pstride = C * kPwLanesPanel, panels = pw.panels();
  const float* x = X + c0 * P;
  const Residual none{nullptr, false};
  for (int64_t pn = 0; pn < panels; pn += 2) {
    // The panels' rows from c0 on: a K range of each panel is its rows c0..c1, contiguous.
    const float* wp = pw.w.data() + pn * pstride + c0 * kPwLanesPanel;
    const int64_t m0 = pn * kPwLanesPanel;
    float* y = Y + m0 * P;
    if (pn + 1 < panels) {
      pair_pixels(n, x, P, wp, pstride, zeros, y, std::min(2 * kPwLanesPanel, pw.M - m0), ConvAct{}, 0, P, none, nullptr);
      continue;
    }
    one_panel(n, x, P, wp, zeros, y, std::min(kPwLanesPanel, pw.M - m0), ConvAct{}, 0, P, none, nullptr);
  }
}

#else  // not x86-64: have_avx512() is false, so this is never called.

void pw_lanes(const PwLanesWeights&, int64_t, const float*, float*, int64_t, int64_t, int64_t, const ConvAct&,
              const float*) {
  std::abort();
}
void pw_lanes_pair(const PwLanesWeights&, int64_t, const float*, float*, int64_t, int64_t, int64_t, const ConvAct&,
                   const float*) {
  std::abort();
}
void pw_lanes_partial(const PwLanesWeights&, const float*, float*, int64_t, int64_t, int64_t) { std::abort(); }

#endif

}  // namespace memlane::cpu::simd
