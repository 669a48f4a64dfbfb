// Host memory that starts on a 64-byte cache line: the arena, the workspace and the kernels'
// packed weights (cpu/aligned_floats.h), which the kernels read in whole 64-byte vectors.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace memlane {

inline constexpr uint64_t kCacheLineBytes = 64;

// `bytes` rounded up to whole lines (0 takes one): what alloc_cache_lines allocates.
inline uint64_t cache_line_bytes(uint64_t bytes) {
  return bytes ? (bytes + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes : kCacheLineBytes;
}

// cache_line_bytes(bytes), 64-byte aligned; free() it. Null when the allocation failed.
inline void* alloc_cache_lines(uint64_t bytes) { return std::aligned_alloc(kCacheLineBytes, cache_line_bytes(bytes)); }

}  // namespace memlane
