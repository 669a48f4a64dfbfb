// A conv's folded activation applied to a 16-float vector in registers before its store (the
// depthwise kernels): no second pass over the output. Same floats as conv_activate's vector
// loops, NaN included: Relu (y > 0 ? y : 0) maps NaN to 0, clip() (std::min(std::max(y, lo),
// hi)) keeps it; x86 max/min return their second operand when either is NaN, hence the order.
#pragma once

#include "cpu/conv_act.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace memlane::cpu {

// True when act_vec16 applies `a` (the caller then skips conv_activate).
inline bool act_in_registers(const ConvAct& a) { return a.kind != ConvAct::kNone; }

// vmath::exp8 / sigmoid8 on 16 lanes: the same operations in the same order, so the same
// floats as the standalone Sigmoid / SiLU ops' vector loop.
__attribute__((target("avx512f"))) inline __m512 sigmoid16(__m512 x) {
  namespace c = vmath::c;
  __m512 v = _mm512_sub_ps(_mm512_setzero_ps(), x);
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(c::kExpLo)), _mm512_set1_ps(c::kExpHi));
  const __m512 fx = _mm512_floor_ps(_mm512_fmadd_ps(v, _mm512_set1_ps(c::kLog2e), _mm512_set1_ps(0.5f)));
  __m512 g = _mm512_fnmadd_ps(fx, _mm512_set1_ps(c::kLn2Hi), v);
  g = _mm512_fnmadd_ps(fx, _mm512_set1_ps(c::kLn2Lo), g);
  __m512 y = _mm512_set1_ps(c::kP0);
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP1));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP2));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP3));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP4));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP5));
  y = _mm512_fmadd_ps(_mm512_mul_ps(y, g), g, _mm512_add_ps(g, _mm512_set1_ps(1.f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, _mm512_mul_ps(y, _mm512_castsi512_ps(e))));
}

__attribute__((target("avx512f"))) inline __m512 act_vec16(__m512 v, const ConvAct& a) {
  switch (a.kind) {
    case ConvAct::kNone: return v;
    case ConvAct::kRelu: return _mm512_max_ps(v, _mm512_setzero_ps());
    case ConvAct::kClip: return _mm512_min_ps(_mm512_set1_ps(a.hi), _mm512_max_ps(_mm512_set1_ps(a.lo), v));
    case ConvAct::kHardSwish: {  // clip_hard.cc's hard_swish: v * min(max(v/6 + 0.5, 0), 1)
      const __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(1.f)));
    }
    case ConvAct::kSiLU: return _mm512_mul_ps(v, sigmoid16(v));  // conv_activate: y * sigmoid(y)
  }
  return v;
}

}  // namespace memlane::cpu

#endif
