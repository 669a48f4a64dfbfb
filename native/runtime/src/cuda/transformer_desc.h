// Descriptors of the CUDA transformer ops from a plan op (the checks the CPU backend's
// matmul_batched.cc and attention.cc make), shared by validation and launch in forward.cc.
#pragma once

#include <string>

#include "kernels.h"
#include "plan/plan.h"

namespace memlane::cuda {

// MatMul whose B is not a 2-D weight: broadcast leading dims, dims[0] = batch. False + *why
// when the shapes do not fit.
bool batched_desc(const Plan& plan, const Op& op, int64_t batch, BatchedMatMulDesc* d, std::string* why);

// The fused Attention op: Q, Kt, V, Y of one rank with equal leading dims; the optional mask
// broadcasting to the scores.
bool attention_desc(const Plan& plan, const Op& op, int64_t batch, AttentionDesc* d, std::string* why);

}  // namespace memlane::cuda
