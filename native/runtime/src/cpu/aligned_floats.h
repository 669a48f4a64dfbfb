// A float vector whose data starts on a 64-byte cache line. Packed weights are read by the
// kernels in whole 64-byte vectors (one 16-float panel row half at a time); std::vector's
// memory is only 16-byte aligned (glibc malloc, and an mmapped block starts 16 bytes into its
// page), so every such load straddled two cache lines, and on an Intel Xeon a straddling load
// takes a second pass through its load port.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace memlane::cpu {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlign = 64;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes ? bytes : kAlign);
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
