#include "cpu/sgemm_pool.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>

#include "cpu/env_count.h"
#include "cpu/thread_pool.h"

namespace memlane::cpu {
namespace {

// Multiply-adds a slice must get before a product is split (~25 us on one core, several
// times a pool worker's wake-up).
constexpr int64_t kMinMacsPerSlice = int64_t(1) << 20;
// Slices align to this many rows / columns (OpenBLAS's AVX-512 micro-tile is 16 x 4 / 4 x 16).
constexpr int64_t kAlign = 16;

void one(bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
         int64_t ldb, float beta, float* C, int64_t ldc) {
  // One row (a classifier at batch 1): OpenBLAS 0.3.21's sgemm packs all of B for it, which
  // costs as much as the product; sgemv streams B once.
  if (M == 1) {
    if (transB) cblas_sgemv(CblasRowMajor, CblasNoTrans, int(N), int(K), alpha, B, int(ldb), A, 1, beta, C, 1);
    else cblas_sgemv(CblasRowMajor, CblasTrans, int(K), int(N), alpha, B, int(ldb), A, 1, beta, C, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transB ? CblasTrans : CblasNoTrans, int(M), int(N), int(K), alpha, A,
              int(lda), B, int(ldb), beta, C, int(ldc));
}

}  // namespace

int blas_threads() {
  static const int n = int(std::max(1L, std::min(env_count("MEMLANE_BLAS_THREADS", 1), 1024L)));
  return n;
}

void sgemm_pool(ThreadPool* pool, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const int64_t T = pool && blas_threads() == 1 ? pool->threads() : 1;
  const int64_t macs = M * N * K;
  const bool by_cols = N >= M;  // a column slice repacks A (M x K), a row slice B (K x N)
  const int64_t units = ((by_cols ? N : M) + kAlign - 1) / kAlign;
  const int64_t slices = std::min({T, units, macs / kMinMacsPerSlice});
  if (slices <= 1) return one(transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  pool->parallel_for(units, (units + slices - 1) / slices, [&](int64_t u0, int64_t u1) {
    if (by_cols) {
      const int64_t j0 = u0 * kAlign, j1 = std::min(N, u1 * kAlign);
      const float* Bj = transB ? B + j0 * ldb : B + j0;
      one(transB, M, j1 - j0, K, alpha, A, lda, Bj, ldb, beta, C + j0, ldc);
    } else {
      const int64_t i0 = u0 * kAlign, i1 = std::min(M, u1 * kAlign);
      one(transB, i1 - i0, N, K, alpha, A + i0 * lda, lda, B, ldb, beta, C + i0 * ldc, ldc);
    }
  });
}

}  // namespace memlane::cpu
