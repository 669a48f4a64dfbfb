// 16-lane math shared by the AVX-512 kernels (avx512.cc): the same formulas as vmath.h's
// 8-lane ones, so an AVX-512 path computes the floats its AVX2 counterpart does. (A conv's
// folded activation on 16 lanes: act_vec16, conv_act_avx512.h.)
// Include only from files whose functions carry target("avx512f").
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "cpu/vmath.h"

#define MEMLANE_AVX512 __attribute__((target("avx512f")))

namespace memlane::cpu::simd::detail {

// The Cephes exp of vmath.h, 16 lanes (same clamp, same polynomial, same rounding, 0 below kExpLo).
MEMLANE_AVX512 inline __m512 exp16(__m512 x) {
  namespace c = vmath::c;
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(c::kExpLo), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(c::kExpLo)), _mm512_set1_ps(c::kExpHi));
  const __m512 fx = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(c::kLog2e), _mm512_set1_ps(0.5f)),
                                         _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 g = _mm512_fnmadd_ps(fx, _mm512_set1_ps(c::kLn2Hi), x);
  g = _mm512_fnmadd_ps(fx, _mm512_set1_ps(c::kLn2Lo), g);
  __m512 y = _mm512_set1_ps(c::kP0);
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP1));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP2));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP3));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP4));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(c::kP5));
  y = _mm512_fmadd_ps(_mm512_mul_ps(y, g), g, _mm512_add_ps(g, _mm512_set1_ps(1.f)));
  // y * 2^fx in one instruction; fx is in [-126, 128] after the clamp. Up to 127 this is the
  // same exact power-of-two product as vmath.h's exponent-bits multiply; at 128 (x at the upper
  // clamp) those bits are +inf, while scalef gives y * 2^128 (finite for y < 1).
  return _mm512_maskz_mov_ps(_knot_mask16(under), _mm512_scalef_ps(y, fx));
}

// vmath.h's sigmoid8 and tanh8 on 16 lanes (same formulas, exact division).
MEMLANE_AVX512 inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
MEMLANE_AVX512 inline __m512 tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f), two = _mm512_set1_ps(2.f);
  return _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(exp16(_mm512_mul_ps(two, x)), one)));
}

}  // namespace memlane::cpu::simd::detail

#endif
