// Batched matrix product with numpy broadcasting over the leading dims, as a plain function
// over raw pointers: Y[l] = A[l] x B[l] for every index l of the broadcast leading dims.
#pragma once

#include <cstdint>

namespace memlane::cpu {

class ThreadPool;

inline constexpr int kMatMulMaxLead = 8;

struct BatchedMatMulDims {
  int lead = 0;                              // number of leading (batch) dims
  int64_t dims[kMatMulMaxLead] = {};         // output's leading dims
  int64_t a_stride[kMatMulMaxLead] = {};     // element stride of A's matrices per leading dim (0 = broadcast)
  int64_t b_stride[kMatMulMaxLead] = {};
  int64_t M = 0, K = 0, N = 0;               // A slices [M, K], B slices [K, N], Y slices [M, N] (contiguous)
};

// Y's slices are contiguous in leading-dim order. pool may be null (runs on the caller).
void matmul_batched(const float* A, const float* B, float* Y, const BatchedMatMulDims& d, ThreadPool* pool);

}  // namespace memlane::cpu
