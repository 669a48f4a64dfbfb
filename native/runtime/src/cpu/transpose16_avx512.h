// A 16x16 float transpose in AVX-512 registers (the channel-blocked depthwise conv's layout
// changes: 16 channel planes <-> 16 positions of 16 channels).
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace memlane::cpu {

// r[k] (16 lanes each) -> r[j] lane k = old r[k] lane j: a 16x16 transpose in registers.
__attribute__((target("avx512f"))) inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // r[4q + m] now holds, in each 128-bit lane L, rows 4q..4q+3 of columns 4L + m.
  for (int q = 0; q < 4; q += 2)
    for (int m = 0; m < 4; ++m) {
      t[4 * q + m] = _mm512_shuffle_f32x4(r[4 * q + m], r[4 * q + 4 + m], 0x88);      // lanes 0,2 | 0,2
      t[4 * q + 4 + m] = _mm512_shuffle_f32x4(r[4 * q + m], r[4 * q + 4 + m], 0xDD);  // lanes 1,3 | 1,3
    }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xDD);
    r[4 + m] = _mm512_shuffle_f32x4(t[4 + m], t[12 + m], 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(t[4 + m], t[12 + m], 0xDD);
  }
}

}  // namespace memlane::cpu

#endif
