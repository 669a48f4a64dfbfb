// exports.freePieces(): which blocks the calling thread's malloc arena can hand out from memory
// it already holds, as [[sizeKiB, count], ...] largest first; null off glibc or where fork fails.
// The Node twin of python/memlane_worker/free_pieces.py (docs/memory.md, "What the arena takes
// from held memory"): node-ort's load probe (src/workers/node-ort-load-probe.mjs) reads it after
// onnxruntime-node created its session on this same thread, whose arena its first regions
// and their handle tables will come from.
//
// How: in a forked child (fork copies the calling thread and its arena; the parent's heap stays
// as it was), malloc blocks of 32 MiB, 16 MiB, ... 32 KiB, as many of each as come from resident
// pages (mincore: at least 7/8 of the block's pages), and send the counts back over a pipe. A
// block from a grown heap or a fresh mmap is not resident, which ends that size. The child
// reads residency instead of writing (a write would copy each held page), allocates through
// malloc nothing but the blocks it counts (the counts and the residency vector live on its
// stack and in a static), and leaves with _exit (no destructors, no atexit handlers of Node's).
#include <napi.h>

#include <cstddef>
#include <cstdint>

#if defined(__GLIBC__)
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#endif

#include "class_registry.h"

namespace memlane::addon {
namespace {

constexpr int kLargestShift = 25;   // 32 MiB: glibc's largest dynamic mmap threshold
constexpr int kSmallestShift = 15;  // 32 KiB: an ORT arena region's handle table is 1/32 of it
constexpr int kSizes = kLargestShift - kSmallestShift + 1;

#if defined(__GLIBC__)
// One byte a page of the largest block (plus the page a misaligned block spills into). Static,
// so that the child's residency checks malloc nothing.
unsigned char residency[(std::size_t{1} << kLargestShift) / 4096 + 2];

bool MostlyResident(void* p, std::size_t size, long page) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = addr - addr % page;
  const std::size_t pages = (addr + size - first + page - 1) / page;
  if (pages > sizeof(residency)) return false;  // pages above 4 KiB only shrink the count
  if (mincore(reinterpret_cast<void*>(first), pages * page, residency) != 0) return false;
  std::size_t resident = 0;
  for (std::size_t i = 0; i < pages; ++i) resident += residency[i] & 1;
  return resident * 8 >= pages * 7;
}

[[noreturn]] void CarveAndExit(int fd) {
  const long page = sysconf(_SC_PAGESIZE);
  std::uint32_t counts[kSizes] = {};
  for (int i = 0; i < kSizes; ++i) {
    const std::size_t size = std::size_t{1} << (kLargestShift - i);
    for (;;) {
      void* p = std::malloc(size);
      if (p == nullptr || !MostlyResident(p, size, page)) break;
      ++counts[i];
    }
  }
  const char* out = reinterpret_cast<const char*>(counts);
  std::size_t left = sizeof(counts);
  while (left > 0) {
    const ssize_t n = write(fd, out, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(1);
    out += n;
    left -= static_cast<std::size_t>(n);
  }
  _exit(0);
}

// The counts the child sent, or false where it failed (a short read, a signal, a non-zero exit).
bool Carve(std::uint32_t (&counts)[kSizes]) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    CarveAndExit(fds[1]);
  }
  close(fds[1]);
  char* in = reinterpret_cast<char*>(counts);
  std::size_t got = 0;
  while (got < sizeof(counts)) {
    const ssize_t n = read(fds[0], in + got, sizeof(counts) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return got == sizeof(counts) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
#endif

Napi::Value FreePieces(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
#if defined(__GLIBC__)
  std::uint32_t counts[kSizes] = {};
  if (!Carve(counts)) {
    Napi::Error::New(env, "freePieces: the carving child failed").ThrowAsJavaScriptException();
    return env.Null();
  }
  Napi::Array out = Napi::Array::New(env);
  std::uint32_t k = 0;
  for (int i = 0; i < kSizes; ++i) {
    if (counts[i] == 0) continue;
    Napi::Array row = Napi::Array::New(env, 2);
    row.Set(0u, Napi::Number::New(env, double((std::size_t{1} << (kLargestShift - i)) / 1024)));
    row.Set(1u, Napi::Number::New(env, double(counts[i])));
    out.Set(k++, row);
  }
  return out;
#else
  return env.Null();  // not glibc's malloc: which blocks it holds cannot be told this way
#endif
}

void Init(Napi::Env env, Napi::Object exports) { exports.Set("freePieces", Napi::Function::New(env, FreePieces, "freePieces")); }

}  // namespace

MEMLANE_ADDON_CLASS(freePieces, Init);

}  // namespace memlane::addon
