// One row-major cblas_sgemm split across the backend's own thread pool. OpenBLAS itself runs
// single-threaded (cpu_backend.cc): its pthread workers spin after every call and would take
// the cores from the pool's kernels (depthwise, pooling, elementwise), and a call from a batch
// lane's thread would start more threads than there are cores. So the kernels that multiply
// split the product here instead, each slice one single-threaded sgemm.
#pragma once

#include <cstdint>

namespace memlane::cpu {

class ThreadPool;

// C[M x N] = alpha * A[M x K] * op(B) + beta * C, op(B) = B [K x N] or, transB, B^T with B
// [N x K]. Slices of whole rows or columns, whichever keeps the duplicated packing smaller
// (a column slice packs all of A again, a row slice all of B); one call when the product is
// too small to pay a worker's wake-up, or when the pool has one thread. One row (M = 1) is
// an sgemv.
// OpenBLAS's own thread count: 1, or MEMLANE_BLAS_THREADS (an A/B aid: OpenBLAS threading
// each product as before, sgemm_pool then making one call).
int blas_threads();

void sgemm_pool(ThreadPool* pool, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace memlane::cpu
