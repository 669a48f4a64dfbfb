// The arena bytes a sample that no kernel ever writes. A fused kernel (a Conv's epilogue, the
// 1x1 -> depthwise pair, MatMul -> Add bias -> Gelu, the channel affine) writes only its last
// op's output: the tensors in between have arena space in the plan and are never touched, so
// where no other tensor shares their bytes those pages never become resident. memlane
// estimate reads this figure from its load probe (src/estimate/native-load.ts) instead of
// copying the fusion rules: Swin's MLP (MatMul -> Add -> Gelu, 3136 x 128 a sample) left
// 368 KiB a sample of its Add's output untouched, 23 MiB at batch 64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/kernel.h"
#include "plan/plan.h"

namespace memlane::cpu {

// `kernels`: plan op i's at kernels[first + i], nullptr for an op folded into the kernel before
// it (`first`: where a view of ops [first, ...) of a larger plan starts, the batch tail's); the
// ops [0, end) are those run in the plan's arena. Graph inputs count as written (they are
// copied in).
uint64_t arena_unwritten_bytes_per_sample(const Plan& plan, const std::vector<std::unique_ptr<Kernel>>& kernels, size_t end, size_t first = 0);

}  // namespace memlane::cpu
