// Denormal floats flushed to zero while memlane-rt's CPU kernels run (MXCSR's FTZ and DAZ).
// Why: on Intel cores an SSE/AVX operation whose input or result is denormal (below 1.2e-38)
// takes a microcode assist of ~100+ cycles. Inference never needs those values, yet real
// graphs make them: gpt2's causal mask (finfo.min) once gave its masked attention scores
// exp(-87) = FLT_MIN, and every product of those with V was a denormal: its two Attention ops
// took 4.2 ms a call instead of 0.11 (bench:zoo on a Xeon, native/ORT 4.1x). The flush costs
// two MXCSR writes a run; results change only where they would have been denormal (|x| <
// 1.2e-38). MEMLANE_KEEP_DENORMALS=1 leaves MXCSR alone (an A/B aid).
#pragma once


#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "cpu/env_count.h"

namespace memlane::cpu {

inline bool flush_denormals_enabled() {
  static const bool on = env_count("MEMLANE_KEEP_DENORMALS", 0) != 1;
  return on;
}

#if defined(__x86_64__) || defined(__i386__)
// FTZ (bit 15) and DAZ (bit 6) set for this scope on the calling thread, the caller's MXCSR
// restored after: the runtime also runs inside Node and Python processes, whose own float
// code must keep IEEE denormals.
class DenormalsFlushed {
 public:
  DenormalsFlushed() : saved_(_mm_getcsr()), on_(flush_denormals_enabled()) {
    if (on_) _mm_setcsr(saved_ | kFtzDaz);
  }
  ~DenormalsFlushed() {
    if (on_) _mm_setcsr(saved_);
  }
  DenormalsFlushed(const DenormalsFlushed&) = delete;
  DenormalsFlushed& operator=(const DenormalsFlushed&) = delete;

  // For threads memlane-rt owns (the pool's workers): set for the thread's life.
  static void set_for_this_thread() {
    if (flush_denormals_enabled()) _mm_setcsr(_mm_getcsr() | kFtzDaz);
  }

 private:
  static constexpr unsigned kFtzDaz = 0x8040;
  unsigned saved_;
  bool on_;
};
#else
class DenormalsFlushed {
 public:
  DenormalsFlushed() = default;
  static void set_for_this_thread() {}
};
#endif

}  // namespace memlane::cpu
