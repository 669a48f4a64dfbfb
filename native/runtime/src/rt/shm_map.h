// `shm` TensorRefs (docs/protocol.md): input tensors the orchestrator put in a POSIX
// shared-memory segment instead of a frame. The segments of one task are mapped read-only
// while the task runs and unmapped when the ShmMaps goes, after it; the orchestrator
// creates and unlinks them, memlane-rt never does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace memlane::rt {

// Said in hello.capabilities: this worker reads `shm` TensorRefs.
inline constexpr const char* kShmCapability = "shm";

class ShmMaps {
 public:
  ShmMaps() = default;
  ShmMaps(const ShmMaps&) = delete;
  ShmMaps& operator=(const ShmMaps&) = delete;
  ~ShmMaps();

  // Bytes [offset, offset + length) of /dev/shm/<segment>, mapped once per segment. Throws
  // TaskError: SHM_UNAVAILABLE when the segment cannot be opened or mapped (gone, refused),
  // MALFORMED_MESSAGE for a bad name or a range outside the segment. `where` names the ref.
  const void* range(const std::string& segment, int64_t offset, int64_t length, const std::string& where);

 private:
  struct Mapping {
    void* addr;
    size_t size;
  };
  std::map<std::string, Mapping> maps_;
};

}  // namespace memlane::rt
