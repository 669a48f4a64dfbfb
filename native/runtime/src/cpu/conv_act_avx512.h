// A conv's folded activation applied to a 16-float vector in registers before its store (the
// depthwise, direct, pointwise-lanes and sgemm_nn_rows paths): no second pass over the output.
// The formulas are conv_activate's (conv_act.h): Relu, Clip and HardSwish give the same floats
// as its loops, NaN included: Relu (y > 0 ? y : 0) maps NaN to 0, clip() (std::min(std::max(y,
// lo), hi)) keeps it; x86 max/min return their second operand when either is NaN, hence the
// order. SiLU's sigmoid is simd::detail::sigmoid16, built on exp16 (vmath's Cephes exp on 16 lanes): the
// same floats as the standalone op's 8-lane vector loop, but not always as its scalar tail
// (exp1's products may round differently, ~1 ulp), and at x <= -88.38, where exp clamps,
// ~4e-39 instead of 0 (exp16 scales by 2^128 exactly, exp8's exponent bits give inf).
#pragma once

#include "cpu/conv_act.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cstdlib>

#include "cpu/simd/avx512_math.h"

namespace memlane::cpu {

// Every ConvAct kind must be handled here: a kind added without a case is a compile error
// (-Werror=switch below), never an activation silently dropped.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
__attribute__((target("avx512f"))) inline __m512 act_vec16(__m512 v, const ConvAct& a) {
  switch (a.kind) {
    case ConvAct::kNone: return v;
    case ConvAct::kRelu: return _mm512_max_ps(v, _mm512_setzero_ps());
    case ConvAct::kClip: return _mm512_min_ps(_mm512_set1_ps(a.hi), _mm512_max_ps(_mm512_set1_ps(a.lo), v));
    case ConvAct::kHardSwish: {  // clip_hard.cc's hard_swish: v * min(max(v/6 + 0.5, 0), 1)
      const __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(1.f)));
    }
    case ConvAct::kSiLU: return _mm512_mul_ps(v, simd::detail::sigmoid16(v));  // conv_activate: y * sigmoid(y)
  }
  std::abort();  // a ConvAct whose kind is none of the above (corrupt): fail, do not guess
}
#pragma GCC diagnostic pop

}  // namespace memlane::cpu

#endif
