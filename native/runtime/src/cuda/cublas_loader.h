// cuBLAS opened at run time (no headers or libs at build time on CI). Tries $MEMLANE_CUBLAS,
// then libcublas.so.13, libcublas.so.12, libcublas.so. Prototypes and enum values are
// declared here, as in cublas_api.h (they are ABI-stable across 12.x and 13.x).
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace memlane::cuda {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;
enum : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum : int { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 };
enum : int { CUDA_R_32F = 0, CUDA_R_16F = 2 };                  // cudaDataType
enum : int { CUBLAS_COMPUTE_32F = 68 };                          // cublasComputeType_t
enum : int { CUBLAS_GEMM_DEFAULT = -1 };                         // cublasGemmAlgo_t

struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, int) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*sgemm_strided_batched)(cublasHandle_t, int, int, int, int, int, const float*,
                                          const float*, int, long long, const float*, int,
                                          long long, const float*, float*, int, long long,
                                          int) = nullptr;
  // Mixed precision (fp16 in, fp32 accumulate): cublasGemmStridedBatchedEx.
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, int, int, int, int, int, const void*,
                                            const void*, int, int, long long, const void*, int,
                                            int, long long, const void*, void*, int, int,
                                            long long, int, int, int) = nullptr;
  std::string library;  // the file that was opened
};

// Opens cuBLAS once per process. Returns nullptr and sets *why when no library or a
// needed symbol is missing.
const CublasApi* load_cublas(std::string* why);

}  // namespace memlane::cuda
