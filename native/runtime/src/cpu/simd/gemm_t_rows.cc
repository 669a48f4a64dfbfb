// A few rows of A against B^T, B read once (see gemm_t_rows.h).
#include "cpu/simd/gemm_t_rows.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))

namespace memlane::cpu::simd {
namespace {

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

// Columns of K a pass: R (up to 8) rows of A times kKBlock floats stay in L2 (64 KiB) while
// B's rows stream past them. Without blocks A came from L3 once per two rows of B where its
// rows are long (vgg11's first classifier layer, K = 25088: 8 rows are 784 KiB), 1.4x slower
// than a GEMV a row.
constexpr int64_t kKBlock = 2048;

// The outputs of a block: the first K block writes alpha * s (+ beta * c), the later ones add.
AVX512 inline void finish(float* y, __m512 s, float alpha, float cterm, bool first) {
  const float v = alpha * _mm512_reduce_add_ps(s);
  *y = first ? v + cterm : *y + v;
}

// R rows of A (1-8) x 2 rows of B over kn columns (lda = ldb = the full K): 2R accumulators in
// one pass, so that B's rows stream from memory while every row of A is multiplied with them
// (a pass per few rows of A, each after the first reading B from L2, cost the memory time plus
// the compute time, not the larger of the two). `next` (nullable): the following two rows of
// B at the same columns, prefetched at the pace of these (the hardware prefetcher alone left
// the memory idle, as in gemv_t).
template <int R>
AVX512 inline void block(int64_t kn, int64_t K, const float* A, const float* b0, const float* next, float* Y,
                         int64_t ldy, float alpha, const float* cterm, bool first) {
  __m512 s0[R], s1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) s0[r] = s1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kn; k += 16) {
    if (next) {
      _mm_prefetch(reinterpret_cast<const char*>(next + k), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next + K + k), _MM_HINT_T0);
    }
    const __mmask16 m = tail_mask(kn - k);
    const __m512 v0 = _mm512_maskz_loadu_ps(m, b0 + k), v1 = _mm512_maskz_loadu_ps(m, b0 + K + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_maskz_loadu_ps(m, A + r * K + k);
      s0[r] = _mm512_fmadd_ps(a, v0, s0[r]);
      s1[r] = _mm512_fmadd_ps(a, v1, s1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    finish(Y + r * ldy, s0[r], alpha, cterm ? cterm[0] : 0.f, first);
    finish(Y + r * ldy + 1, s1[r], alpha, cterm ? cterm[1] : 0.f, first);
  }
}

// Columns [j0, j1) (an even count) of R rows, one K block.
template <int R>
AVX512 void rows(int64_t j0, int64_t j1, int64_t kn, int64_t K, const float* A, const float* B, float* Y, int64_t ldy,
                 float alpha, const float* cterm, bool first) {
  for (int64_t j = j0; j + 2 <= j1; j += 2) {
    const float* b0 = B + j * K;
    block<R>(kn, K, A, b0, j + 4 <= j1 ? b0 + 2 * K : nullptr, Y + j, ldy, alpha, cterm ? cterm + j : nullptr, first);
  }
}

// One row of B (an odd column left) against M rows of A, one K block.
AVX512 void column(int64_t M, int64_t kn, int64_t K, const float* A, const float* b, float* Y, int64_t ldy, float alpha,
                   const float* cterm, bool first) {
  for (int64_t r = 0; r < M; ++r) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t k = 0; k < kn; k += 16) {
      const __mmask16 m = tail_mask(kn - k);
      s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, A + r * K + k), _mm512_maskz_loadu_ps(m, b + k), s);
    }
    finish(Y + r * ldy, s, alpha, cterm ? cterm[0] : 0.f, first);
  }
}

}  // namespace

AVX512 void gemm_t_rows(int64_t M, int64_t j0, int64_t j1, int64_t K, const float* A, const float* B, float* Y,
                        int64_t ldy, float alpha, float beta, const float* c) {
  using Rows = void (*)(int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t, float,
                        const float*, bool);
  static constexpr Rows kRows[8] = {rows<1>, rows<2>, rows<3>, rows<4>, rows<5>, rows<6>, rows<7>, rows<8>};
  // beta * c, once (the first K block adds it).
  std::vector<float> cterm;
  if (c) {
    cterm.resize(size_t(j1));
    for (int64_t j = j0; j < j1; ++j) cterm[size_t(j)] = beta * c[j];
  }
  const float* ct = c ? cterm.data() : nullptr;
  const int64_t jend = j0 + (j1 - j0) / 2 * 2;
  for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
    const int64_t kn = std::min(kKBlock, K - k0);
    for (int64_t r = 0; r < M; r += 8) {
      const int64_t R = std::min<int64_t>(8, M - r);
      kRows[R - 1](j0, jend, kn, K, A + r * K + k0, B + k0, Y + r * ldy, ldy, alpha, ct, k0 == 0);
      if (jend < j1)
        column(R, kn, K, A + r * K + k0, B + jend * K + k0, Y + r * ldy + jend, ldy, alpha, ct ? ct + jend : nullptr,
               k0 == 0);
    }
  }
}

}  // namespace memlane::cpu::simd

#else

namespace memlane::cpu::simd {
void gemm_t_rows(int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t, float, float,
                 const float*) {
  std::abort();
}
}  // namespace memlane::cpu::simd

#endif
