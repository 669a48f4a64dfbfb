// A float vector whose data starts on a 64-byte cache line. Packed weights are read by the
// kernels in whole 64-byte vectors (one 16-float panel row half at a time); std::vector's
// memory is only 16-byte aligned (glibc malloc, and an mmapped block starts 16 bytes into its
// page), so every such load straddled two cache lines: resnet18's pixel-rows and pointwise
// convs ran 2-4 % slower for it on an Intel Xeon (docs/native-cpu.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "cache_line_alloc.h"

namespace memlane::cpu {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    void* p = alloc_cache_lines(uint64_t(n) * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

}  // namespace memlane::cpu
