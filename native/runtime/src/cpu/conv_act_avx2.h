// A conv's folded activation applied to an 8-float vector in registers before its store: the
// AVX2 paths' act_vec16 (conv_act_avx512.h), for CPUs without AVX-512. The formulas and the
// operand order of max/min are conv_activate's (conv_act.h), so Relu, Clip and HardSwish give
// its floats, NaN included; SiLU uses vmath's sigmoid8, the standalone op's own 8-lane code.
// AVX2+FMA is the library's baseline (-march=x86-64-v3): no target attribute, no run-time check.
#pragma once

#include "cpu/conv_act.h"
#include "cpu/vmath.h"

#ifdef MEMLANE_VMATH_AVX2
#include <immintrin.h>

#include <cstdlib>

namespace memlane::cpu {

// A ConvAct kind added without a case here is a compile error, never a dropped activation.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
inline __m256 act_vec8(__m256 v, const ConvAct& a) {
  switch (a.kind) {
    case ConvAct::kNone: return v;
    case ConvAct::kRelu: return _mm256_max_ps(v, _mm256_setzero_ps());  // NaN -> 0, as y > 0 ? y : 0
    case ConvAct::kClip: return _mm256_min_ps(_mm256_set1_ps(a.hi), _mm256_max_ps(_mm256_set1_ps(a.lo), v));
    case ConvAct::kHardSwish: {  // clip_hard.cc's hard_swish: v * min(max(v/6 + 0.5, 0), 1)
      const __m256 t = _mm256_fmadd_ps(v, _mm256_set1_ps(1.f / 6.f), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(v, _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(1.f)));
    }
    case ConvAct::kSiLU: return _mm256_mul_ps(v, vmath::sigmoid8(v));  // conv_activate: y * sigmoid(y)
  }
  std::abort();  // a corrupt kind: fail, do not guess
}
#pragma GCC diagnostic pop

}  // namespace memlane::cpu

#endif
