// The folded Relu / Clip of a conv applied to a 16-float vector in registers before its store
// (the depthwise kernels): no second pass over the output. Same floats as conv_activate,
// NaN included: Relu (y > 0 ? y : 0) maps NaN to 0, clip() (std::min(std::max(y, lo), hi))
// keeps it; x86 max/min return their second operand when either is NaN, hence the order.
#pragma once

#include "cpu/conv_act.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace memlane::cpu {

// True when act_vec16 applies `a` (the caller then skips conv_activate).
inline bool act_in_registers(const ConvAct& a) { return a.kind == ConvAct::kRelu || a.kind == ConvAct::kClip; }

__attribute__((target("avx512f"))) inline __m512 act_vec16(__m512 v, const ConvAct& a) {
  if (a.kind == ConvAct::kRelu) return _mm512_max_ps(v, _mm512_setzero_ps());
  if (a.kind == ConvAct::kClip) return _mm512_min_ps(_mm512_set1_ps(a.hi), _mm512_max_ps(_mm512_set1_ps(a.lo), v));
  return v;
}

}  // namespace memlane::cpu

#endif
