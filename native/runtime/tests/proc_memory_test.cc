// The runtime's /proc readers: read_smaps() sums per path, names nameless mappings by the rules
// of docs/protocol.md (SmapsSummary) on a written smaps text, and on this process's own smaps
// adds up to smaps_rollup's totals (read_memory) within 1 %.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "rt/proc_memory.h"

using memlane::rt::SmapsCounts;
using memlane::rt::SmapsSummary;

namespace {

const SmapsCounts* find(const SmapsSummary& s, const std::string& name) {
  for (const auto& [path, counts] : s)
    if (path == name) return &counts;
  return nullptr;
}

std::string mapping(const char* range, const char* perms, const char* path, int kib) {
  std::string m = std::string(range) + " " + perms + " 00000000 00:00 0";
  if (*path) m += std::string("                          ") + path;
  const std::string k = std::to_string(kib);
  m += "\nSize: " + k + " kB\nRss: " + k + " kB\nPss: " + k + " kB\nPss_Dirty: " + k + " kB\nPrivate_Clean: 0 kB\n" +
       "Private_Dirty: " + k + " kB\nAnonymous: " + k + " kB\nSwap: 0 kB\nSwapPss: 0 kB\nVmFlags: rd wr mr mw me ac\n";
  return m;
}

void pseudo_names() {
  const std::string text =
      mapping("7f0000000000-7f0000001000", "---p", "", 0) +    // guard page
      mapping("7f0000001000-7f0000801000", "rw-p", "", 40) +   // a thread's stack above it
      mapping("7f0004000000-7f0004300000", "rw-p", "", 100) +  // arena: 64 MiB aligned ...
      mapping("7f0004300000-7f0008000000", "---p", "", 0) +    // ... and its reserved rest
      mapping("7f0009000000-7f0009100000", "rw-p", "", 7) +    // plain anonymous
      mapping("7f000a000000-7f000a001000", "r--p", "/dev/shm/memlane-1-r-0 (deleted)", 4) +
      mapping("7f000b000000-7f000b001000", "r--p", "/x/model.mlplan", 3) +
      mapping("7f000b001000-7f000b002000", "r--p", "/x/model.mlplan", 2);
  char path[] = "/tmp/memlane-smaps-XXXXXX";
  const int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, text.data(), text.size()) == ssize_t(text.size()));
  close(fd);
  const SmapsSummary s = memlane::rt::read_smaps(path);
  unlink(path);
  const SmapsCounts* g = find(s, "[anon guarded]");
  const SmapsCounts* a = find(s, "[anon arena]");
  const SmapsCounts* n = find(s, "[anon]");
  const SmapsCounts* plan = find(s, "/x/model.mlplan");
  CHECK(g && (*g)[0] == 40 && (*g)[3] == 40 && (*g)[4] == 40);
  CHECK(a && (*a)[0] == 100);
  CHECK(n && (*n)[0] == 7);  // the guard and the reserved rest have no RSS
  CHECK(plan && (*plan)[0] == 5 && (*plan)[1] == 5);
  CHECK(find(s, "/dev/shm/memlane-1-r-0 (deleted)") != nullptr);
}

void sums_to_rollup() {
  // 16 MiB of anonymous memory, every page written.
  const size_t bytes = size_t(16) << 20;
  auto* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(p != MAP_FAILED);
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  const SmapsSummary s = memlane::rt::read_smaps();
  const memlane::rt::MemoryReading r = memlane::rt::read_memory();
  int64_t rss = 0, pss = 0, uss = 0, anon = 0;
  for (const auto& [path, c] : s) {
    rss += c[0];
    pss += c[1];
    uss += c[2] + c[3];
    if (path.rfind("[anon", 0) == 0) anon += c[0];
  }
  CHECK_MSG(std::llabs(rss - r.rssKiB) <= r.rssKiB / 100, std::to_string(rss) + " vs rollup " + std::to_string(r.rssKiB));
  CHECK_MSG(std::llabs(pss - r.pssKiB) <= r.pssKiB / 100, std::to_string(pss) + " vs rollup " + std::to_string(r.pssKiB));
  CHECK_MSG(std::llabs(uss - r.ussKiB) <= r.ussKiB / 100, std::to_string(uss) + " vs rollup " + std::to_string(r.ussKiB));
  CHECK_MSG(anon >= 16 * 1024, "anonymous " + std::to_string(anon) + " KiB < the 16 MiB written");
  munmap(p, bytes);
}

}  // namespace

int main() {
  pseudo_names();
  sums_to_rollup();
  return mltest::finish("proc_memory_test");
}
