// The process's own memory reading from /proc/self (docs/protocol.md, MemoryReading).
#pragma once

#include <cstdint>

namespace memlane::rt {

struct MemoryReading {
  int64_t rssKiB = 0, pssKiB = 0, ussKiB = 0, swapKiB = 0, hwmKiB = 0;
  int64_t gpuKiB = -1;  // -1 = absent
};

MemoryReading read_memory();
// Resets VmHWM to the current RSS (echo 5 > /proc/self/clear_refs); false where forbidden.
bool reset_peak();
// Wall-clock ms since the epoch when this process started (from /proc/self/stat).
double process_start_ms();
double now_ms();

}  // namespace memlane::rt
