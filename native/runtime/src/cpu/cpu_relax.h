// The pause hint of a spin-wait loop (x86's PAUSE: fewer pipeline flushes when the awaited
// store lands, and the sibling hyperthread gets the core meanwhile); nothing elsewhere.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace memlane::cpu {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace memlane::cpu
