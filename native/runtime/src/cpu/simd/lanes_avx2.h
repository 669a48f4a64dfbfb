// 8-lane helpers the AVX2 kernels share for the partial vector at the end of a row: a mask of
// its first n lanes (for maskload), and a store of its first n lanes.
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

}  // namespace memlane::cpu::simd

#endif
