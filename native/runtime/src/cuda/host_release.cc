#include "host_release.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace memlane::cuda {

ReleaseResult release_host_pages(const void* start, uint64_t bytes) {
  ReleaseResult r;
  if (!start || bytes == 0) return r.reason = "no weights", r;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(start), e = a + bytes;
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return r.reason = "cannot read /proc/self/maps", r;
  char line[4096];
  bool ok = false;
  while (std::fgets(line, sizeof line, f)) {
    uintptr_t lo = 0, hi = 0;
    char perms[8] = {0};
    unsigned long long off = 0;
    char dev[32] = {0};
    unsigned long inode = 0;
    int consumed = 0;
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %31s %lu %n", &lo, &hi, perms, &off,
                    dev, &inode, &consumed) < 6)
      continue;
    if (a < lo || a >= hi) continue;
    if (e > hi) { r.reason = "weights span more than one mapping"; break; }
    if (perms[1] == 'w') { r.reason = "weights are in writable memory (not a read-only file mapping)"; break; }
    if (inode == 0) { r.reason = "weights are in anonymous memory (not a file mapping)"; break; }
    ok = true;
    break;
  }
  std::fclose(f);
  if (!ok) {
    if (r.reason.empty()) r.reason = "weights not found in /proc/self/maps";
    return r;
  }
  // Whole pages inside the mapping: round the start down (the mapping starts page-aligned,
  // the plan header before the blob is parsed already) and the end up (within the mapping).
  const uintptr_t lo = a & ~(page - 1), hi = (e + page - 1) & ~(page - 1);
  if (madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) {
    r.reason = std::string("madvise(MADV_DONTNEED) failed: ") + std::strerror(errno);
    return r;
  }
  r.released = true;
  r.bytes = hi - lo;
  return r;
}

}  // namespace memlane::cuda
