// 16-lane helpers the stride-2 AVX-512 kernels share: a row's columns read with its borders as
// zeros, and 32 consecutive floats split into their even and odd columns (column stride 2:
// the depthwise and direct convs, the strided 1x1 gather, 3-wide max pooling). Include only
// from files whose functions carry target("avx512f").
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#define MEMLANE_LANES_AVX512 __attribute__((target("avx512f")))

namespace memlane::cpu::simd {

// Lanes l of a 16-float load at row + s that lie inside [0, W).
inline __mmask16 lanes_inside(int64_t s, int64_t W) {
  const int64_t lo = std::clamp<int64_t>(-s, 0, 16), hi = std::clamp<int64_t>(W - s, 0, 16);
  return hi > lo ? __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1)) : __mmask16(0);
}

// row[s .. s + 16) of a row of W floats, zero outside [0, W) (a conv's padding). Only
// masked-in lanes are read: the base may lie before the row or past it.
MEMLANE_LANES_AVX512 inline __m512 load_in_row(const float* row, int64_t s, int64_t W) {
  if (s >= 0 && s + 16 <= W) return _mm512_loadu_ps(row + s);
  const __mmask16 m = lanes_inside(s, W);
  return m ? _mm512_maskz_loadu_ps(m, row + s) : _mm512_setzero_ps();
}

// Columns 0, 2, ..., 30 (even_lanes) or 1, 3, ..., 31 (odd_lanes) of the 32 floats (a, b).
MEMLANE_LANES_AVX512 inline __m512 even_lanes(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
}
MEMLANE_LANES_AVX512 inline __m512 odd_lanes(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
}

// Lanes 0..15 of the 32 floats (lo, hi) moved down by S: (lo[S..15], hi[0..S-1]). The masked
// form with every lane kept: the plain one's undefined pass-through operand sets off GCC 12's
// -Wmaybe-uninitialized.
template <int S>
MEMLANE_LANES_AVX512 inline __m512 shift_lanes(__m512 lo, __m512 hi) {
  const __m512i l = _mm512_castps_si512(lo);
  return _mm512_castsi512_ps(_mm512_mask_alignr_epi32(l, __mmask16(0xFFFF), _mm512_castps_si512(hi), l, S));
}

}  // namespace memlane::cpu::simd

#undef MEMLANE_LANES_AVX512
#endif
