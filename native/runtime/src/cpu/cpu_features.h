// Run-time choice of every CPU kernel's AVX-512 path (conv, pooling, and the transformer
// kernels through simd::have_avx512()): the CPU has AVX-512F and MEMLANE_CPU_NO_AVX512 is
// unset. ctest runs the op suites once with it set, so the portable
// paths (what CPUs without AVX-512 run) are tested on AVX-512 machines too.
#pragma once

#include <cstdlib>

namespace memlane::cpu {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
inline bool use_avx512f() {
  static const bool use = __builtin_cpu_supports("avx512f") && std::getenv("MEMLANE_CPU_NO_AVX512") == nullptr;
  return use;
}
#else
inline bool use_avx512f() { return false; }
#endif

}  // namespace memlane::cpu
