// ReduceMean / ReduceSum / ReduceMax over any set of axes of a row-major tensor, as a plain
// function over raw pointers.
#pragma once

#include <cstdint>

namespace memlane::cpu {

enum class ReduceKind : uint8_t { kMean, kSum, kMax };

inline constexpr int kReduceMaxRank = 8;

// x has `rank` dims; reduced[i] marks the axes folded away. y receives the kept dims in
// order (its layout is the same with or without keepdims). rank <= kReduceMaxRank.
void reduce_axes(ReduceKind k, const float* x, float* y, const int64_t* dims, const bool* reduced, int rank);

}  // namespace memlane::cpu
