// A tiny test harness: CHECK records a failure and goes on; main returns the count.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace mltest {
inline int& failures() {
  static int n = 0;
  return n;
}
inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: FAIL %s\n", file, line, what.c_str());
  ++failures();
}
inline int finish(const char* name) {
  if (failures()) std::fprintf(stderr, "%s: %d failure(s)\n", name, failures());
  else std::printf("%s: ok\n", name);
  return failures() ? 1 : 0;
}
}  // namespace mltest

#define CHECK(cond) \
  do { if (!(cond)) mltest::fail(__FILE__, __LINE__, #cond); } while (0)
#define CHECK_MSG(cond, msg) \
  do { if (!(cond)) mltest::fail(__FILE__, __LINE__, std::string(#cond) + " -- " + (msg)); } while (0)
#define CHECK_CONTAINS(hay, needle) \
  do { const std::string h_ = (hay); if (h_.find(needle) == std::string::npos) \
    mltest::fail(__FILE__, __LINE__, "'" + h_ + "' lacks '" + std::string(needle) + "'"); } while (0)
