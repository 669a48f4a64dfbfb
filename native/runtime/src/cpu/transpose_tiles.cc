#include "cpu/transpose_tiles.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

#include "cpu/simd/lanes_avx2.h"
#define MEMLANE_TILES_AVX2 1
#endif

namespace memlane::cpu {

void transpose_tiles(const float* x, int64_t xs, float* y, int64_t ys, int64_t A, int64_t B) {
  int64_t a0 = 0;
#ifdef MEMLANE_TILES_AVX2
  for (; a0 + 8 <= A; a0 += 8) {
    int64_t b0 = 0;
    for (; b0 + 8 <= B; b0 += 8) {
      __m256 r[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(x + a0 + (b0 + k) * xs);  // 8 a's of input row b0 + k
      simd::transpose8x8(r);
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
