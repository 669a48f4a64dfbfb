// A few rows of A against a large B^T (a classifier at batch 2-16): every row of B is read
// from memory once for all of A's rows. OpenBLAS's sgemm packs all of B at every call (as
// much traffic as the product), and one gemv_t a row reads B once a row.
// Needs have_avx512().
#pragma once

#include <cstdint>

namespace memlane::cpu::simd {

// Most rows of A worth a call: beyond it OpenBLAS's packed product (B read and packed once)
// costs less than another pass over B a group of 8 rows.
inline constexpr int64_t kGemmTRowsMax = 16;

// Y[m][j] = alpha * dot(A[m], B[j]) (+ beta * c[j] when c is not null) for m < M, j in
// [j0, j1); A row-major [M][K], B row-major [N][K] (transB), Y row-major with leading dim ldy.
// Up to 8 rows of A a pass over B (two rows of B at a time, the next two prefetched); more rows
// take another pass, which finds B's rows in L2 only where the caller's column range is small.
void gemm_t_rows(int64_t M, int64_t j0, int64_t j1, int64_t K, const float* A, const float* B, float* Y, int64_t ldy,
                 float alpha, float beta, const float* c);

}  // namespace memlane::cpu::simd
