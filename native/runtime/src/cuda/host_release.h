// Releasing the host pages of weights once they are on the device: madvise(MADV_DONTNEED)
// over the plan's weight blob. Only safe on a read-only file mapping (pages drop and are
// re-read from the file if touched again); on anonymous or writable memory it would zero
// the data, so the mapping is checked in /proc/self/maps first and left alone otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace memlane::cuda {

struct ReleaseResult {
  bool released = false;
  uint64_t bytes = 0;   // page-aligned bytes advised
  std::string reason;   // why not released
};

ReleaseResult release_host_pages(const void* start, uint64_t bytes);

}  // namespace memlane::cuda
