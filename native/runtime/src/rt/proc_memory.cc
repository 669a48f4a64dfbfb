#include "rt/proc_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace memlane::rt {
namespace {

// Reads a small /proc file into buf without allocating.
size_t slurp(const char* path, char* buf, size_t cap) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t n = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf + n, cap - 1 - n);
    if (r <= 0) break;
    n += size_t(r);
    if (n >= cap - 1) break;
  }
  ::close(fd);
  buf[n] = 0;
  return n;
}

int64_t field_kib(const char* text, const char* key) {
  const char* p = text;
  const size_t k = std::strlen(key);
  while ((p = std::strstr(p, key)) != nullptr) {
    if ((p == text || p[-1] == '\n') && p[k] == ':') return std::strtoll(p + k + 1, nullptr, 10);
    p += k;
  }
  return 0;
}

}  // namespace

MemoryReading read_memory() {
  MemoryReading m;
  char buf[4096];
  if (slurp("/proc/self/smaps_rollup", buf, sizeof buf)) {
    m.rssKiB = field_kib(buf, "Rss");
    m.pssKiB = field_kib(buf, "Pss");
    m.ussKiB = field_kib(buf, "Private_Clean") + field_kib(buf, "Private_Dirty");
    m.swapKiB = field_kib(buf, "Swap");
  }
  if (slurp("/proc/self/status", buf, sizeof buf)) {
    m.hwmKiB = field_kib(buf, "VmHWM");
    if (!m.rssKiB) m.rssKiB = field_kib(buf, "VmRSS");
  }
  return m;
}

bool reset_peak() {
  int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

double now_ms() {
  using namespace std::chrono;
  return double(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) / 1000.0;
}

double process_start_ms() {
  char buf[4096];
  if (!slurp("/proc/self/stat", buf, sizeof buf)) return now_ms();
  // Field 22 (starttime, clock ticks after boot); fields after the ")" of the command name.
  const char* p = std::strrchr(buf, ')');
  if (!p) return now_ms();
  int field = 2;
  unsigned long long start = 0;
  for (; *p; ++p) {
    if (*p == ' ') {
      ++field;
      if (field == 22) {
        start = std::strtoull(p + 1, nullptr, 10);
        break;
      }
    }
  }
  // Age = time since boot now - start time since boot (both on the boot clock; /proc/stat's
  // btime is whole seconds, too coarse for a phase that lasts milliseconds).
  timespec bt;
  if (clock_gettime(CLOCK_BOOTTIME, &bt) != 0) return now_ms();
  const double ticks = double(sysconf(_SC_CLK_TCK));
  const double ageMs = (double(bt.tv_sec) + double(bt.tv_nsec) / 1e9 - double(start) / ticks) * 1000.0;
  return now_ms() - (ageMs > 0 ? ageMs : 0);
}

}  // namespace memlane::rt
