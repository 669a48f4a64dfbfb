// Packed-panel GEMM (see gemm_panels.h).
#include "cpu/simd/gemm_panels.h"

#include <algorithm>
#include <cstdlib>

#include "cpu/env_count.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMLANE_PANELS_X86 1
#define AVX512 __attribute__((target("avx512f")))
#endif

namespace memlane::cpu::simd {

PackedPanels pack_panels(const float* B, int64_t K, int64_t N, bool transB) {
  PackedPanels p;
  p.K = K;
  p.N = N;
  const int64_t L = kPanelCols;
  p.w.assign(uint64_t(p.panels() * K * L), 0.f);
  for (int64_t j = 0; j < N; ++j) {
    float* dst = p.w.data() + (j / L) * K * L + j % L;
    for (int64_t k = 0; k < K; ++k) dst[k * L] = transB ? B[j * K + k] : B[k * N + j];
  }
  return p;
}

#ifdef MEMLANE_PANELS_X86
namespace {

// K a block: a tile's panel block (kKBlock x 32 floats, 32 KiB) stays in L1 across a row
// block's tiles, and the row block's A (kRowBlock x kKBlock floats, 64 KiB) in L2 across the
// panels. Without blocks, A's 64 rows of K = 3072 (768 KiB) left L2 at every panel: BERT's
// feed-forward output projection ran at 0.67x of ONNX Runtime's speed, its K = 768 layers at 0.87x.
constexpr int64_t kKBlock = 256;
constexpr int64_t kRowBlock = 64;
// Panels whose partial sums for a row block (kRowBlock x 32 floats each, 8 KiB) stay in L2
// across the K blocks: 16 is 128 KiB of C. (MEMLANE_PANELS_GROUP=N to try others, 0 for one group)
constexpr int64_t kPanelGroup = 16;
// gemm_panels_gather's K block: two panels' block (32 KiB) in L1 across a conv tile's rows.
// 128 measured 0.97x the time of 256 on resnet18 (sum of per-op minima, Intel Xeon).
constexpr int64_t kGatherKBlock = 128;

// gemm_panels_gather's K block for a product of depth K: kGatherKBlock, but where that would
// leave a last block of under a quarter of one, that remainder is shared out over the others
// (at most 159 rows, 40 KiB of two panels: still L1). ResNet's 7x7 3-channel stem (K = 147)
// ran as 128 + 19, every tile loading and storing its 28 accumulators again for 19 steps:
// one block measured 0.94-0.99x the stem's time (min of 100 calls, 4 rounds, one CPU).
inline int64_t gather_k_block(int64_t K) {
  const int64_t whole = K / kGatherKBlock, rest = K % kGatherKBlock;
  if (whole == 0 || rest == 0 || rest >= kGatherKBlock / 4) return kGatherKBlock;
  return (K + whole - 1) / whole;
}

inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

// A tile's end: on the last K block the epilogue (alpha, bias, Relu), then the store of the
// panel's columns below N (m0, m1) of its MR rows.
template <int MR>
AVX512 inline void store_tile(__m512 (&c0)[MR], __m512 (&c1)[MR], float* C, int64_t ldc, bool last,
                              const PanelEpilogue& e, const float* bias, __mmask16 m0, __mmask16 m1) {
  if (last) {
    const __m512 va = _mm512_set1_ps(e.alpha), zero = _mm512_setzero_ps();
    const __m512 bv0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : zero;
    const __m512 bv1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : zero;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      c0[r] = _mm512_fmadd_ps(c0[r], va, bv0);
      c1[r] = _mm512_fmadd_ps(c1[r], va, bv1);
      if (e.relu) c0[r] = _mm512_max_ps(c0[r], zero), c1[r] = _mm512_max_ps(c1[r], zero);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(C + r * ldc, m0, c0[r]);
    _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c1[r]);
  }
}

// MR rows (1-8) x one panel over kn columns of K. first: the accumulators start at 0 (else
// from C's partial sums); last: the epilogue, and only the panel's columns below N are stored.
template <int MR>
AVX512 void tile(int64_t kn, const float* A, int64_t lda, const float* b, float* C, int64_t ldc, bool first, bool last,
                 const PanelEpilogue& e, const float* bias, __mmask16 m0, __mmask16 m1) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    c0[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, C + r * ldc);
    c1[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, C + r * ldc + 16);
  }
  int64_t k = 0;
  if constexpr (MR == 1) {
    // One row: four steps of K in independent accumulators (two chains of dependent FMAs left
    // the multiply-add latency, not the memory, setting the pace of a classifier at batch 1).
    __m512 d0 = _mm512_setzero_ps(), d1 = d0, e0 = d0, e1 = d0, f0 = d0, f1 = d0;
    for (; k + 4 <= kn; k += 4, b += 4 * kPanelCols) {
      c0[0] = _mm512_fmadd_ps(_mm512_set1_ps(A[k]), _mm512_loadu_ps(b), c0[0]);
      c1[0] = _mm512_fmadd_ps(_mm512_set1_ps(A[k]), _mm512_loadu_ps(b + 16), c1[0]);
      d0 = _mm512_fmadd_ps(_mm512_set1_ps(A[k + 1]), _mm512_loadu_ps(b + 32), d0);
      d1 = _mm512_fmadd_ps(_mm512_set1_ps(A[k + 1]), _mm512_loadu_ps(b + 48), d1);
      e0 = _mm512_fmadd_ps(_mm512_set1_ps(A[k + 2]), _mm512_loadu_ps(b + 64), e0);
      e1 = _mm512_fmadd_ps(_mm512_set1_ps(A[k + 2]), _mm512_loadu_ps(b + 80), e1);
      f0 = _mm512_fmadd_ps(_mm512_set1_ps(A[k + 3]), _mm512_loadu_ps(b + 96), f0);
      f1 = _mm512_fmadd_ps(_mm512_set1_ps(A[k + 3]), _mm512_loadu_ps(b + 112), f1);
    }
    c0[0] = _mm512_add_ps(_mm512_add_ps(c0[0], d0), _mm512_add_ps(e0, f0));
    c1[0] = _mm512_add_ps(_mm512_add_ps(c1[0], d1), _mm512_add_ps(e1, f1));
  }
  // (A software prefetch of the panel 16 steps ahead by the first row tile measured no
  // difference: one contiguous stream a panel is what the hardware prefetcher follows.)
  for (; k < kn; ++k, b += kPanelCols) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
      c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
    }
  }
  store_tile<MR>(c0, c1, C, ldc, last, e, bias, m0, m1);
}

// tile() on the implicit A of gemm_panels_gather: row r's element k at rows[r][cols[k]].
template <int MR>
AVX512 void gather_tile(int64_t kn, const float* const* rows, const int32_t* cols, const float* b, float* C,
                        int64_t ldc, bool first, bool last, const PanelEpilogue& e, const float* bias, __mmask16 m0,
                        __mmask16 m1) {
  __m512 c0[MR], c1[MR];
  const float* a[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    a[r] = rows[r];
    c0[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, C + r * ldc);
    c1[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, C + r * ldc + 16);
  }
  for (int64_t k = 0; k < kn; ++k, b += kPanelCols) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    const int64_t o = cols[k];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 v = _mm512_set1_ps(a[r][o]);
      c0[r] = _mm512_fmadd_ps(v, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(v, b1, c1[r]);
    }
  }
  store_tile<MR>(c0, c1, C, ldc, last, e, bias, m0, m1);
}

using GatherTile = void (*)(int64_t, const float* const*, const int32_t*, const float*, float*, int64_t, bool, bool,
                            const PanelEpilogue&, const float*, __mmask16, __mmask16);
constexpr GatherTile kGatherTiles[8] = {gather_tile<1>, gather_tile<2>, gather_tile<3>, gather_tile<4>,
                                        gather_tile<5>, gather_tile<6>, gather_tile<7>, gather_tile<8>};

// gather_tile over two panels at once: MR rows (1-7) x 64 columns, b the first panel's block and
// b + pstride the second's. 28 accumulators take 7 broadcasts and 4 loads a step of K where the
// 8 x 32 tile takes 8 and 2 for 16: on an Intel Xeon (AVX-512, two FMA units) 5-25 % more
// multiply-adds a second on a 49-row, K = 4608 product (resnet18's 7x7-map 512-channel convs).
// pf (nullable): the next pair's block of panels (pf and pf + pstride, kn rows of 32 floats
// each), prefetched into L2 a row of each a k step.
template <int MR>
AVX512 void gather_tile_wide(int64_t kn, const float* const* rows, const int32_t* cols, const float* b, int64_t pstride,
                             float* C, int64_t ldc, bool first, bool last, const PanelEpilogue& e, const float* bias,
                             const __mmask16 (&m)[4], const float* pf) {
  __m512 c[4][MR];
  const float* a[MR];
#pragma GCC unroll 7
  for (int r = 0; r < MR; ++r) {
    a[r] = rows[r];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) c[v][r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m[v], C + r * ldc + 16 * v);
  }
  const float* b2 = b + pstride;
  for (int64_t k = 0; k < kn; ++k, b += kPanelCols, b2 += kPanelCols) {
    const __m512 w0 = _mm512_loadu_ps(b), w1 = _mm512_loadu_ps(b + 16);
    const __m512 w2 = _mm512_loadu_ps(b2), w3 = _mm512_loadu_ps(b2 + 16);
    if (pf) {
      const char* q = reinterpret_cast<const char*>(pf + k * kPanelCols);
      _mm_prefetch(q, _MM_HINT_T1);
      _mm_prefetch(q + 64, _MM_HINT_T1);
      _mm_prefetch(q + pstride * sizeof(float), _MM_HINT_T1);
      _mm_prefetch(q + pstride * sizeof(float) + 64, _MM_HINT_T1);
    }
    const int64_t o = cols[k];
#pragma GCC unroll 7
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r][o]);
      c[0][r] = _mm512_fmadd_ps(x, w0, c[0][r]);
      c[1][r] = _mm512_fmadd_ps(x, w1, c[1][r]);
      c[2][r] = _mm512_fmadd_ps(x, w2, c[2][r]);
      c[3][r] = _mm512_fmadd_ps(x, w3, c[3][r]);
    }
  }
  if (last) {
    const __m512 va = _mm512_set1_ps(e.alpha), zero = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512 bv = bias ? _mm512_maskz_loadu_ps(m[v], bias + 16 * v) : zero;
#pragma GCC unroll 7
      for (int r = 0; r < MR; ++r) {
        c[v][r] = _mm512_fmadd_ps(c[v][r], va, bv);
        if (e.relu) c[v][r] = _mm512_max_ps(c[v][r], zero);
      }
    }
  }
#pragma GCC unroll 7
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(C + r * ldc + 16 * v, m[v], c[v][r]);
}

using GatherTileWide = void (*)(int64_t, const float* const*, const int32_t*, const float*, int64_t, float*, int64_t,
                                bool, bool, const PanelEpilogue&, const float*, const __mmask16 (&)[4], const float*);
constexpr int kWideRows = 7;
constexpr GatherTileWide kGatherTilesWide[kWideRows] = {gather_tile_wide<1>, gather_tile_wide<2>, gather_tile_wide<3>,
                                                        gather_tile_wide<4>, gather_tile_wide<5>, gather_tile_wide<6>,
                                                        gather_tile_wide<7>};

// n rows in ceil(n / most) tiles of near-equal height: a 49-pixel map in seven tiles of 7, not
// six of 8 and one row whose chains of dependent multiply-adds run at a quarter of the rate.
inline int64_t tile_start(int64_t n, int64_t most, int64_t t) {
  const int64_t tiles = (n + most - 1) / most;
  return n * t / tiles;
}

using Tile = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, bool, bool, const PanelEpilogue&,
                      const float*, __mmask16, __mmask16);
constexpr Tile kTiles[8] = {tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>, tile<7>, tile<8>};

}  // namespace

AVX512 void gemm_panels(int64_t M, int64_t p0, int64_t p1, const float* A, int64_t lda, const PackedPanels& B, float* C,
                        int64_t ldc, const PanelEpilogue& e) {
  const int64_t K = B.K;
  // MEMLANE_PANELS_GROUP=0: every panel in one group (each K block sweeps them all, as before).
  static const int64_t switch_group = env_count("MEMLANE_PANELS_GROUP", kPanelGroup);
  const int64_t group = switch_group > 0 ? switch_group : std::max<int64_t>(1, p1 - p0);
  for (int64_t r0 = 0; r0 < M; r0 += kRowBlock) {
    const int64_t r1 = std::min(M, r0 + kRowBlock);
    // One row tile reads each panel block once: K in one block (no partial sums through C).
    const int64_t kb = r1 - r0 <= 8 ? std::max<int64_t>(K, 1) : kKBlock;
    for (int64_t g0 = p0; g0 < p1; g0 += group) {
      const int64_t g1 = std::min(p1, g0 + group);
      for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += kb) {
        const int64_t kn = std::min(kb, K - k0);
        const bool first = k0 == 0, last = k0 + kb >= K;
        for (int64_t p = g0; p < g1; ++p) {
          const int64_t j = p * kPanelCols, w = std::min(kPanelCols, B.N - j);
          const __mmask16 m0 = tail_mask(w), m1 = tail_mask(w - 16);
          const float* b = B.w.data() + (p * K + k0) * kPanelCols;
          const float* bias = e.bias ? e.bias + j : nullptr;
          for (int64_t r = r0; r < r1; r += 8) {
            const int64_t mr = std::min<int64_t>(8, r1 - r);
            kTiles[mr - 1](kn, A + r * lda + k0, lda, b, C + r * ldc + j, ldc, first, last, e, bias, m0, m1);
          }
        }
      }
    }
  }
}

AVX512 void gemm_panels_gather(int64_t M, int64_t p0, int64_t p1, const float* const* rows, const int32_t* cols,
                               const PackedPanels& B, float* C, int64_t ldc, const PanelEpilogue& e) {
  // MEMLANE_GATHER_NARROW=1: every panel on its own in 8-row x 32-column tiles (A/B of the tile shape).
  static const bool narrow = env_count("MEMLANE_GATHER_NARROW", 0) != 0;
  // MEMLANE_GATHER_NO_PF=1: no prefetch of the next pair of panels (A/B).
  static const bool gather_pf = env_count("MEMLANE_GATHER_NO_PF", 0) == 0;
  // All M rows at each K block, not kRowBlock at a time: a conv's tile of pixels reads B (W, 9
  // MiB on a 512-channel 3x3 conv: out of L2) once a call, its block of two panels (32 KiB)
  // from L1 and L2 across the row tiles; the rows' input stays in L2 (the caller keeps the tile
  // small enough). Row blocks of 64 streamed W again every 64 pixels: resnet18's 7x7-map convs
  // 0.70-0.79x the time with this order and the caller's larger tiles (conv_pixel_rows.cc).
  const int64_t K = B.K;
  const int64_t kb = gather_k_block(K);
  for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += kb) {
    const int64_t kn = std::min(kb, K - k0);
    const bool first = k0 == 0, last = k0 + kb >= K;
    for (int64_t p = p0; p < p1;) {
      const int64_t j = p * kPanelCols, w = std::min(2 * kPanelCols, B.N - j);
      const float* b = B.w.data() + (p * K + k0) * kPanelCols;
      const float* bias = e.bias ? e.bias + j : nullptr;
      if (p + 1 < p1 && !narrow) {  // two panels: tiles of up to 7 rows x 64 columns
        const __mmask16 m[4] = {tail_mask(w), tail_mask(w - 16), tail_mask(w - 32), tail_mask(w - 48)};
        // The first tile prefetches the next pair's block: each pair's is a stream of its own
        // that the hardware picks up only after its first misses, which the first tile waits on.
        // (the next pair is whole: a last odd panel's block is prefetched as a pair too, past it)
        const float* pf = !gather_pf ? nullptr
                          : p + 2 < p1 ? b + 2 * K * kPanelCols
                          : k0 + kb < K ? B.w.data() + (p0 * K + k0 + kb) * kPanelCols
                          : nullptr;
        for (int64_t t = 0, r = 0; r < M; ++t) {
          const int64_t next = tile_start(M, kWideRows, t + 1);
          kGatherTilesWide[next - r - 1](kn, rows + r, cols + k0, b, K * kPanelCols, C + r * ldc + j, ldc, first, last, e,
                                         bias, m, t == 0 ? pf : nullptr);
          r = next;
        }
        p += 2;
      } else {  // a last odd panel: tiles of up to 8 rows x 32 columns
        for (int64_t t = 0, r = 0; r < M; ++t) {
          const int64_t next = tile_start(M, 8, t + 1);
          kGatherTiles[next - r - 1](kn, rows + r, cols + k0, b, C + r * ldc + j, ldc, first, last, e, bias, tail_mask(w),
                                     tail_mask(w - 16));
          r = next;
        }
        p += 1;
      }
    }
  }
}

#else

void gemm_panels_gather(int64_t, int64_t, int64_t, const float* const*, const int32_t*, const PackedPanels&, float*,
                        int64_t, const PanelEpilogue&) {
  std::abort();
}

void gemm_panels(int64_t, int64_t, int64_t, const float*, int64_t, const PackedPanels&, float*, int64_t,
                 const PanelEpilogue&) {
  std::abort();
}

#endif

}  // namespace memlane::cpu::simd
