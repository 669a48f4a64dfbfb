#include "rt/shm_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rt/task_ctx.h"

namespace memlane::rt {
namespace {

using protocol::ErrorCode;

// Same rule as src/transport/shm-segment.ts and python/memlane_worker/shm.py: a plain name,
// no path separators, not "." or "..".
bool plain_name(const std::string& s) {
  if (s.empty() || s.size() > 250 || s == "." || s == "..") return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

ShmMaps::~ShmMaps() {
  for (auto& [name, m] : maps_)
    if (m.addr != nullptr) munmap(m.addr, m.size);
}

const void* ShmMaps::range(const std::string& segment_in, int64_t offset, int64_t length, const std::string& where) {
  const std::string segment = segment_in.size() > 0 && segment_in[0] == '/' ? segment_in.substr(1) : segment_in;
  if (!plain_name(segment))
    throw TaskError{int(ErrorCode::kMalformedMessage), where + ": shm.segment must be a plain segment name, got '" + segment_in + "'"};
  if (offset < 0 || length < 0)
    throw TaskError{int(ErrorCode::kMalformedMessage), where + ": shm.offset and shm.length must be non-negative"};
  auto it = maps_.find(segment);
  if (it == maps_.end()) {
    const int fd = shm_open(("/" + segment).c_str(), O_RDONLY, 0);
    if (fd < 0) {
      Val d = Val::map();
      d.set("segment", segment).set("errno", int64_t(errno));
      throw TaskError{int(ErrorCode::kShmUnavailable), where + ": cannot open shared memory segment /dev/shm/" + segment + ": " + std::strerror(errno), d};
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      const int e = errno;
      close(fd);
      throw TaskError{int(ErrorCode::kShmUnavailable), where + ": cannot stat shared memory segment " + segment + ": " + std::strerror(e)};
    }
    Mapping m{nullptr, size_t(st.st_size)};
    if (m.size > 0) {
      m.addr = mmap(nullptr, m.size, PROT_READ, MAP_SHARED, fd, 0);
      if (m.addr == MAP_FAILED) {
        const int e = errno;
        close(fd);
        throw TaskError{int(ErrorCode::kShmUnavailable), where + ": cannot map shared memory segment " + segment + ": " + std::strerror(e)};
      }
    }
    close(fd);  // the mapping stays valid without the descriptor
    it = maps_.emplace(segment, m).first;
  }
  const Mapping& m = it->second;
  if (uint64_t(offset) + uint64_t(length) > m.size) {
    Val d = Val::map();
    d.set("segment", segment).set("offset", offset).set("length", length).set("segmentBytes", int64_t(m.size));
    throw TaskError{int(ErrorCode::kMalformedMessage), where + ": shm range [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                                                          ") lies outside segment " + segment + " of " + std::to_string(m.size) + " bytes", d};
  }
  static const char kEmpty[64] = {};
  return length == 0 ? static_cast<const void*>(kEmpty) : static_cast<const char*>(m.addr) + offset;
}

}  // namespace memlane::rt
