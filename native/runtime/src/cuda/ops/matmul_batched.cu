// MatMul with broadcast leading dims (attention's Q x K^T and attn x V): leading dims whose
// strides chain are merged, then one strided-batched cuBLAS call per index of the remaining
// outer dims (usually a single call). Row-major through the transpose identity, as gemm.cu.
#include <climits>

#include "common.cuh"

namespace memlane::cuda {

cudaError_t matmul_batched(const CublasApi& api, cublasHandle_t h, Prec p, const void* A, const void* B, void* Y,
                           const BatchedMatMulDesc& d, cudaStream_t s, int* cublas_status) {
  *cublas_status = 0;
  if (d.M > INT_MAX || d.K > INT_MAX || d.N > INT_MAX) return cudaErrorInvalidValue;
  // Merge leading dim i into i-1 where both operands' strides chain (Y's always do).
  int64_t dims[kMaxRank], sa[kMaxRank], sb[kMaxRank];
  int lead = 0;
  for (int i = 0; i < d.lead; ++i) {
    if (d.dims[i] == 1) continue;
    if (lead > 0 && sa[lead - 1] == d.a_stride[i] * d.dims[i] && sb[lead - 1] == d.b_stride[i] * d.dims[i]) {
      dims[lead - 1] *= d.dims[i];
      sa[lead - 1] = d.a_stride[i];
      sb[lead - 1] = d.b_stride[i];
      continue;
    }
    dims[lead] = d.dims[i];
    sa[lead] = d.a_stride[i];
    sb[lead] = d.b_stride[i];
    ++lead;
  }
  if (lead == 0) {
    dims[0] = 1;
    sa[0] = sb[0] = 0;
    lead = 1;
  }
  const int64_t inner = dims[lead - 1], MN = d.M * d.N;
  if (inner > INT_MAX) return cudaErrorInvalidValue;
  int64_t outer = 1;
  for (int i = 0; i < lead - 1; ++i) outer *= dims[i];
  const int eb = prec_bytes(p);
  const float alpha = 1.f, beta = 0.f;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, oa = 0, ob = 0;
    for (int i = lead - 2; i >= 0; --i) {
      oa += (rem % dims[i]) * sa[i];
      ob += (rem % dims[i]) * sb[i];
      rem /= dims[i];
    }
    const char* a = static_cast<const char*>(A) + oa * eb;
    const char* b = static_cast<const char*>(B) + ob * eb;
    char* y = static_cast<char*>(Y) + o * inner * MN * eb;
    // Column-major: Y^T [N, M] = B^T [N, K] x A^T [K, M].
    if (p == Prec::kF32)
      *cublas_status = api.sgemm_strided_batched(h, CUBLAS_OP_N, CUBLAS_OP_N, int(d.N), int(d.M), int(d.K), &alpha,
                                                 reinterpret_cast<const float*>(b), int(d.N), sb[lead - 1],
                                                 reinterpret_cast<const float*>(a), int(d.K), sa[lead - 1], &beta,
                                                 reinterpret_cast<float*>(y), int(d.N), MN, int(inner));
    else
      *cublas_status = api.gemm_strided_batched_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, int(d.N), int(d.M), int(d.K), &alpha,
                                                   b, CUDA_R_16F, int(d.N), sb[lead - 1], a, CUDA_R_16F, int(d.K),
                                                   sa[lead - 1], &beta, y, CUDA_R_16F, int(d.N), MN, int(inner),
                                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (*cublas_status != 0) return cudaErrorUnknown;
  }
  (void)s;  // the handle is bound to the stream by the caller
  return cudaSuccess;
}

}  // namespace memlane::cuda
