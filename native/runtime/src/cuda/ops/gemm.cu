// Gemm and MatMul through cuBLAS (row-major by the transpose identity: Y^T = op(B)^T A^T in
// column-major), bias-broadcast and ReLU in the bias_act epilogue. fp16 uses
// cublasGemmStridedBatchedEx with fp32 accumulation.
#include <climits>

#include "common.cuh"

namespace memlane::cuda {
namespace {
// Y[rows, N] (+)= alpha * A[rows, K] op(B), column-major call. beta_in is 0 or 1 (Y was
// pre-filled with the broadcast C when 1).
int gemm_call(const CublasApi& api, cublasHandle_t h, Prec p, const void* A, const void* B,
              void* Y, int64_t rows, int64_t K, int64_t N, bool transB, float alpha,
              float beta) {
  const int opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = transB ? static_cast<int>(K) : static_cast<int>(N);
  if (p == Prec::kF32)
    return api.sgemm_strided_batched(h, opB, CUBLAS_OP_N, (int)N, (int)rows, (int)K, &alpha,
                                     static_cast<const float*>(B), ldb, 0,
                                     static_cast<const float*>(A), (int)K, 0, &beta,
                                     static_cast<float*>(Y), (int)N, 0, 1);
  return api.gemm_strided_batched_ex(h, opB, CUBLAS_OP_N, (int)N, (int)rows, (int)K, &alpha, B,
                                     CUDA_R_16F, ldb, 0, A, CUDA_R_16F, (int)K, 0, &beta, Y,
                                     CUDA_R_16F, (int)N, 0, 1, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
}

template <typename T>
__global__ void k_fill_bias(T* y, const T* c, int64_t c_len, float beta, int64_t N, int64_t n) {
  MEMLANE_GRID_STRIDE(i, n) y[i] = from_f<T>(beta * to_f(c[c_len == 1 ? 0 : i % N]));
}
}  // namespace

cudaError_t gemm(const CublasApi& api, cublasHandle_t h, Prec p, const void* A, const void* B,
                 const void* C, void* Y, const GemmDesc& d, cudaStream_t s, int* cublas_status) {
  *cublas_status = 0;
  if (d.rows <= 0 || d.N <= 0) return cudaSuccess;
  // cuBLAS takes int sizes: a large batch of a MatMul over many rows must not wrap around.
  if (d.rows > INT_MAX || d.K > INT_MAX || d.N > INT_MAX) return cudaErrorInvalidValue;
  float beta = 0.f;
  if (C && d.c_len > 0 && d.beta != 0.f) {
    // Y = beta * C first, then GEMM accumulates with beta 1 (keeps alpha/beta general).
    int64_t n = d.rows * d.N;
    cudaError_t e = dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      k_fill_bias<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(Y),
                                                         static_cast<const T*>(C), d.c_len,
                                                         d.beta, d.N, n);
      return cudaGetLastError();
    });
    if (e != cudaSuccess) return e;
    beta = 1.f;
  }
  *cublas_status = gemm_call(api, h, p, A, B, Y, d.rows, d.K, d.N, d.transB, d.alpha, beta);
  if (*cublas_status != 0) return cudaErrorUnknown;
  return bias_activation(p, Y, nullptr, 1, 1, d.rows * d.N, d.relu, s);
}

}  // namespace memlane::cuda
