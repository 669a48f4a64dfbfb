// 8-lane helpers the AVX2 kernels share: for the partial vector at the end of a row, a mask of
// its first n lanes (for maskload) and a store of its first n lanes; an 8x8 tile transpose.
//
// The store is plain stores of 4, 2 and 1 lanes, not vmaskmovps: on AMD Zen 2/3 vmaskmovps to
// memory is microcoded, one every ~12 cycles. A depthwise 3x3 conv of 480 channels on 14x14
// maps, a masked store a row, ran 96-106 us with it and 82 without (min of 500, 1 thread,
// Zen 3). Loads with a mask (vmaskmovps from memory) stay: they are cheap on both vendors.
#pragma once

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>

namespace memlane::cpu::simd {

// The first n (0..8) lanes set.
inline __m256i first_lanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// p[0, n) = v's first n lanes (n in 0..8); nothing past them is written.
inline void store_first8(float* p, int64_t n, __m256 v) {
  if (n >= 8) return _mm256_storeu_ps(p, v);
  __m128 h = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, h);
    h = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), h);
    h = _mm_movehl_ps(h, h);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, h);
}

// r[k] = row k of an 8x8 tile -> r[k] = column k (unpacks, shuffles, then lane swaps).
inline void transpose8x8(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

}  // namespace memlane::cpu::simd

#endif
