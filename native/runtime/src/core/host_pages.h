// Giving back host pages of the plan's weights: madvise(MADV_DONTNEED) over a read-only file
// mapping drops the pages, and a later read just refaults them from the file. On anonymous or
// writable memory it would zero the data, so the mapping is checked in /proc/self/maps first
// and left alone otherwise. Both backends use it: CUDA once its weights are on the device
// (the whole blob), the CPU backend for weights that only a kernel's repacked copy reads at
// run time (cpu/weight_release.h). Header-only: src/cuda links the shared headers, not
// memlane_core.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace memlane {

struct ReleaseResult {
  bool released = false;
  uint64_t bytes = 0;   // page-aligned bytes advised
  std::string reason;   // why not released
};

// Empty when [start, start + bytes) lies in one read-only file mapping (safe to drop), else
// why not.
inline std::string file_mapping_problem(const void* start, uint64_t bytes) {
  if (!start || bytes == 0) return "no weights";
  const uintptr_t a = reinterpret_cast<uintptr_t>(start), e = a + bytes;
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return "cannot read /proc/self/maps";
  char line[4096];
  std::string why = "weights not found in /proc/self/maps";
  while (std::fgets(line, sizeof line, f)) {
    uintptr_t lo = 0, hi = 0;
    char perms[8] = {0};
    unsigned long long off = 0;
    char dev[32] = {0};
    unsigned long inode = 0;
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %31s %lu", &lo, &hi, perms, &off, dev, &inode) < 6)
      continue;
    if (a < lo || a >= hi) continue;
    if (e > hi) why = "weights span more than one mapping";
    else if (perms[1] == 'w') why = "weights are in writable memory (not a read-only file mapping)";
    else if (inode == 0) why = "weights are in anonymous memory (not a file mapping)";
    else why.clear();
    break;
  }
  std::fclose(f);
  return why;
}

inline uintptr_t host_page_bytes() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

// madvise(DONTNEED) on [lo, hi) (page-aligned); the caller has checked the mapping.
inline ReleaseResult advise_dontneed(uintptr_t lo, uintptr_t hi) {
  ReleaseResult r;
  if (hi <= lo) return r.reason = "no whole page", r;
  if (madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0)
    return r.reason = std::string("madvise(MADV_DONTNEED) failed: ") + std::strerror(errno), r;
  r.released = true;
  r.bytes = hi - lo;
  return r;
}

// Every page the range touches (the whole blob: rounding the start down and the end up stays
// inside the mapping, which starts page-aligned).
inline ReleaseResult release_host_pages(const void* start, uint64_t bytes) {
  if (std::string why = file_mapping_problem(start, bytes); !why.empty()) {
    ReleaseResult r;
    r.reason = why;
    return r;
  }
  const uintptr_t page = host_page_bytes(), a = reinterpret_cast<uintptr_t>(start);
  return advise_dontneed(a & ~(page - 1), (a + bytes + page - 1) & ~(page - 1));
}

// Only the pages wholly inside the range (one weight among others: its neighbours' pages stay
// resident). The caller has checked the mapping with file_mapping_problem.
inline ReleaseResult release_interior_pages(const void* start, uint64_t bytes) {
  const uintptr_t page = host_page_bytes(), a = reinterpret_cast<uintptr_t>(start);
  return advise_dontneed((a + page - 1) & ~(page - 1), (a + bytes) & ~(page - 1));
}

}  // namespace memlane
