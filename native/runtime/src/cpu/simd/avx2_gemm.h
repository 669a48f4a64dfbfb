// The AVX2+FMA counterparts of simd::sgemm_nn / sgemm_nn_rows (avx512.h), for CPUs without
// AVX-512 (Zen 2/3, client Intel): a pointwise conv's product Y[M x P] = W[M x C] X[C x P],
// Winograd's 16 products, im2col products of small K. B is packed a 24-column panel at a time
// (a few KiB of stack), or a block of K x columns at once (up to 128 KiB); A is read in place.
// AVX2+FMA is the library's baseline (-march=x86-64-v3), so these need no target attribute;
// have_avx2_gemm() says whether this build has them (x86-64 with __AVX2__ and __FMA__) and is
// the only check a caller makes.
#pragma once

#include <cstdint>

#include "cpu/conv_act.h"

namespace memlane::cpu::simd {

bool have_avx2_gemm();

// C[M x N] = A[M x K] x B[K x N] (+ bias[N] on every row, when not null), row-major, any
// sizes. Needs have_avx2_gemm().
void sgemm_nn_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc, const float* bias = nullptr);

// sgemm_nn_avx2 (no column bias) with each row finished in registers before its store:
// + row_bias[i] (when not null), + res[i * ldc + j] (a fused residual Add, when not null; act
// then None or Relu; res may be C itself: each element is read before it is written), then
// act (act_vec8, conv_act_avx2.h).
void sgemm_nn_rows_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                        float* C, int64_t ldc, const float* row_bias, const ConvAct& act, const float* res = nullptr);

// C[M x N] = alpha * A[M x K] x B^T (+ C when accumulate), B row-major [N x K] (a Linear's
// weight, Gemm with transB = 1), for a few rows of A (a classifier at batch 2-16): each row of
// B is read once for all of them, four at a time, as dot products along K. OpenBLAS packed all
// of B for every such call (alexnet's 9216 -> 4096 layer: 151 MB a call at batch 2 and up).
void sgemm_nt_few_rows_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float* C, int64_t ldc, float alpha, bool accumulate);

// Whether an M x N x K product runs blocked: K slices x column blocks of B packed in L2, row
// blocks of A inner, so that an A larger than L2 (a conv's weights) streams once a column
// block, not once a 24-column panel. For tests and A/B: MEMLANE_GEMM_NO_BLOCKED=1 makes it
// false. (Where the residual is C itself, K is not sliced, and this may still say true while
// the product, over a K too long for a block, runs panel by panel.)
bool avx2_gemm_blocked(int64_t M, int64_t N, int64_t K);

}  // namespace memlane::cpu::simd
