#include "cpu/transpose_tiles.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#define MEMLANE_TILES_AVX2 1
#endif

namespace memlane::cpu {
namespace {

#ifdef MEMLANE_TILES_AVX2
// r[k] = row k of an 8x8 tile -> r[k] = column k.
inline void transpose8(__m256 (&r)[8]) {
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
#endif

}  // namespace

void transpose_tiles(const float* x, int64_t xs, float* y, int64_t ys, int64_t A, int64_t B) {
  int64_t a0 = 0;
#ifdef MEMLANE_TILES_AVX2
  for (; a0 + 8 <= A; a0 += 8) {
    int64_t b0 = 0;
    for (; b0 + 8 <= B; b0 += 8) {
      __m256 r[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(x + a0 + (b0 + k) * xs);  // 8 a's of input row b0 + k
      transpose8(r);
      for (int k = 0; k < 8; ++k) _mm256_storeu_ps(y + (a0 + k) * ys + b0, r[k]);  // 8 b's of output row a0 + k
    }
    for (; b0 < B; ++b0)
      for (int64_t a = a0; a < a0 + 8; ++a) y[a * ys + b0] = x[a + b0 * xs];
  }
#endif
  for (int64_t a = a0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b) y[a * ys + b] = x[a + b * xs];
}

}  // namespace memlane::cpu
