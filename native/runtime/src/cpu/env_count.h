// The CPU backend's numeric tuning switches (MEMLANE_POOL_SPIN_US, MEMLANE_BLAS_THREADS,
// MEMLANE_CONV_PANEL): one reading rule, so that "abc", "-3", "1e3" or "4x" is not silently a
// different number (atol would make them 0, 0, 1 and 4).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace memlane::cpu {

// The variable's value when it is a whole decimal number >= 0, else `fallback`: unset or
// empty silently; anything else with one line on stderr naming the variable and its value.
inline long env_count(const char* name, long fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(e, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || *e == '+' || *e == '-' || *e == ' ') {
    std::fprintf(stderr, "memlane-rt: %s=\"%s\" is not a whole number >= 0; using %ld\n", name, e, fallback);
    return fallback;
  }
  return v;
}

}  // namespace memlane::cpu
