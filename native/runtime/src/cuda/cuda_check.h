// CUDA_CHECK / CUBLAS_CHECK: on failure, return a Status from the enclosing function after
// writing "<statement> failed: <error> at <file>:<line>" to `*message` (which must be in
// scope as `std::string* message`). Recoverable failures are data (Status), not aborts.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "status.h"

namespace memlane::cuda {

inline std::string cuda_error_text(const char* stmt, cudaError_t e, const char* file, int line) {
  return std::string(stmt) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
         ") at " + file + ":" + std::to_string(line);
}

inline Status status_of(cudaError_t e) {
  return e == cudaErrorMemoryAllocation ? Status::kOutOfMemory : Status::kInternal;
}

}  // namespace memlane::cuda

#define CUDA_CHECK(stmt)                                                                   \
  do {                                                                                     \
    cudaError_t memlane_e_ = (stmt);                                                       \
    if (memlane_e_ != cudaSuccess) {                                                       \
      if (message) *message = ::memlane::cuda::cuda_error_text(#stmt, memlane_e_, __FILE__, __LINE__); \
      return ::memlane::cuda::status_of(memlane_e_);                                       \
    }                                                                                      \
  } while (0)

#define CUBLAS_CHECK(stmt)                                                                 \
  do {                                                                                     \
    int memlane_s_ = static_cast<int>(stmt);                                               \
    if (memlane_s_ != 0) {                                                                 \
      if (message)                                                                         \
        *message = std::string(#stmt) + " failed: cublasStatus " + std::to_string(memlane_s_) + \
                   " at " + __FILE__ + ":" + std::to_string(__LINE__);                     \
      return memlane_s_ == 3 ? ::memlane::Status::kOutOfMemory : ::memlane::Status::kInternal; \
    }                                                                                      \
  } while (0)

// For `Status`-returning helpers: propagate a non-OK status.
#define MEMLANE_TRY(expr)                           \
  do {                                              \
    ::memlane::Status memlane_st_ = (expr);         \
    if (memlane_st_ != ::memlane::Status::kOk) return memlane_st_; \
  } while (0)
