#include "rt/proc_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>
#include <unordered_map>

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

// The whole of a /proc file of unknown size (smaps grows with the number of mappings).
std::string slurp_all(const char* path) {
  std::string out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r <= 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

bool is_header(std::string_view line) {  // "7f12...-7f13... rw-p ..." (field lines start with a capital)
  return !line.empty() && ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f'));
}

// Fields of a mapping header: address range, perms, offset, dev, inode, then the path (may
// hold spaces, absent for anonymous memory).
struct Header {
  uint64_t lo = 0, hi = 0;
  std::string_view perms, path;
};

Header parse_header(std::string_view line) {
  Header h;
  size_t pos = 0;
  auto next = [&]() {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    const size_t b = pos;
    while (pos < line.size() && line[pos] != ' ') ++pos;
    return line.substr(b, pos - b);
  };
  const std::string_view range = next();
  const size_t dash = range.find('-');
  h.lo = std::strtoull(std::string(range.substr(0, dash)).c_str(), nullptr, 16);
  h.hi = dash == std::string_view::npos ? h.lo : std::strtoull(std::string(range.substr(dash + 1)).c_str(), nullptr, 16);
  h.perms = next();
  for (int i = 0; i < 3; ++i) next();  // offset, dev, inode
  while (pos < line.size() && line[pos] == ' ') ++pos;
  h.path = line.substr(pos);
  return h;
}

// Pseudo-names of nameless mappings (docs/protocol.md, SmapsSummary): a writable one right
// above an inaccessible guard of at most kGuardMaxBytes (a pthread stack's layout); a writable
// one starting on a kArenaBytes boundary and filling it, alone or with an inaccessible rest
// right after it (a glibc malloc arena of a non-main thread); else plain anonymous memory.
constexpr uint64_t kGuardMaxBytes = 64 * 1024;
constexpr uint64_t kArenaBytes = 64ull * 1024 * 1024;  // glibc's HEAP_MAX_SIZE on 64-bit

std::string anon_name(const Header& m, const Header* before, const Header* after) {
  if (m.perms.substr(0, 2) != "rw") return "[anon]";
  if (before && before->path.empty() && before->perms.substr(0, 3) == "---" && before->hi == m.lo &&
      before->hi - before->lo <= kGuardMaxBytes)
    return "[anon guarded]";
  const bool fills = m.hi - m.lo == kArenaBytes ||
                     (after && after->path.empty() && after->perms.substr(0, 3) == "---" && after->lo == m.hi &&
                      after->hi == m.lo + kArenaBytes);
  if (m.lo % kArenaBytes == 0 && fills) return "[anon arena]";
  return "[anon]";
}

}  // namespace

SmapsSummary read_smaps(const char* path) {
  SmapsSummary out;
  const std::string text = slurp_all(path);
  std::unordered_map<std::string, size_t> index;
  // A mapping's name is settled when the next header is seen: a pseudo-name depends on both
  // neighbours. Headers point into `text`, which outlives them.
  Header before, current;
  bool haveBefore = false, haveCurrent = false;
  SmapsCounts counts{};
  auto settle = [&](const Header* after) {
    const std::string name = current.path.empty() ? anon_name(current, haveBefore ? &before : nullptr, after) : std::string(current.path);
    auto [it, fresh] = index.emplace(name, out.size());
    if (fresh) out.emplace_back(name, SmapsCounts{});
    SmapsCounts& into = out[it->second].second;
    for (size_t i = 0; i < into.size(); ++i) into[i] += counts[i];
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + start, nl - start);
    start = nl + 1;
    if (is_header(line)) {
      const Header h = parse_header(line);
      if (haveCurrent) settle(&h);
      before = current;
      haveBefore = haveCurrent;
      current = h;
      haveCurrent = true;
      counts = SmapsCounts{};
      continue;
    }
    const size_t colon = line.find(':');
    if (!haveCurrent || colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    for (size_t i = 0; i < std::size(kSmapsFields); ++i)
      if (key == kSmapsFields[i]) {
        counts[i] += std::strtoll(std::string(line.substr(colon + 1)).c_str(), nullptr, 10);
        break;
      }
  }
  if (haveCurrent) settle(nullptr);
  return out;
}

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
