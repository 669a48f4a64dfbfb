// The process's own memory reading from /proc/self (docs/protocol.md, MemoryReading).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memlane::rt {

struct MemoryReading {
  int64_t rssKiB = 0, pssKiB = 0, ussKiB = 0, swapKiB = 0, hwmKiB = 0;
  int64_t gpuKiB = -1;  // -1 = absent
};

MemoryReading read_memory();

// /proc/self/smaps summed per path (docs/protocol.md, "SmapsSummary"): for each path or
// pseudo-name ("[anon]", "[anon guarded]", "[heap]", ...), the counters of kSmapsFields in
// KiB, in first-seen order. Costs a walk of every mapping (far more than smaps_rollup):
// only at phase ends. The orchestrator classifies (src/memory/mapping-kinds.ts).
inline constexpr const char* kSmapsFields[] = {"Rss", "Pss", "Private_Clean", "Private_Dirty", "Anonymous", "Swap"};
using SmapsCounts = std::array<int64_t, 6>;
using SmapsSummary = std::vector<std::pair<std::string, SmapsCounts>>;
SmapsSummary read_smaps(const char* path = "/proc/self/smaps");
// Resets VmHWM to the current RSS (echo 5 > /proc/self/clear_refs); false where forbidden.
bool reset_peak();
// Wall-clock ms since the epoch when this process started (from /proc/self/stat).
double process_start_ms();
double now_ms();

}  // namespace memlane::rt
