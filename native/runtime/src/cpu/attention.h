// Fused attention over one slice (one head of one sample), as a plain function over raw
// pointers: Y = softmax(Q x Kt * scale + mask) x V, computed a block of query rows at a time
// so that only block x T scores ever exist.
#pragma once

#include <cstdint>

namespace memlane::cpu {

struct AttentionSlice {
  const float* q = nullptr;     // [S, d]
  const float* kt = nullptr;    // [d, T]
  const float* v = nullptr;     // [T, dv]
  const float* mask = nullptr;  // element (i, j) at mask[i * mask_row + j * mask_col]; null = none
  int64_t mask_row = 0, mask_col = 0;
  float* y = nullptr;           // [S, dv]
  int64_t S = 0, T = 0, d = 0, dv = 0;
  float scale = 1.f;
};

// Query rows per block (the scratch holds kAttentionRows x T floats).
inline constexpr int64_t kAttentionRows = 32;

void attention_slice(const AttentionSlice& a, float* scratch);

}  // namespace memlane::cpu
