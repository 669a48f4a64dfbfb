// memlane-core-latency [rounds=200000]: the cache-line round trip between the first two CPUs
// this process may run on, two threads pinned one to each, bouncing one atomic word; then what
// that placement costs a kernel: one thread rewriting 1 MiB that the other CPU has just read,
// against 1 MiB of its own lines. Prints `cpu A-B round trip N ns`, then `rewrite 1 MiB after
// cpu B read it X us, own lines Y us` (medians of 15; exit 2 with fewer than two CPUs, 1 when a
// thread cannot be pinned: two threads spinning on one CPU would take a time slice a round).
//
// Why: on a cloud VM the hypervisor moves the vCPUs between physical cores. On the 2-vCPU
// development machine the round trip is about 55 ns most of the time and about 320 ns for
// stretches of seconds (the vCPUs then sit on cores that share no cache), and a 2-thread run
// of a CNN takes 1.3-2.2x as long there, ONNX Runtime's 1.03-1.5x: docs/native-cpu.md, "Two
// threads on a split placement". The second line is why: a store to a line the other core holds
// a copy of must first invalidate it there, and on a split placement that cost 456-520 us a MiB
// against 84-115 on the shared one and 11-16 for the writer's own lines. In a 2-thread run nearly
// every activation is read by both threads, so each op's output lands on such lines. bench:zoo
// runs this before and after each 2-thread round so that its table says which figures were
// taken on such a placement.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

namespace {

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

alignas(64) std::atomic<long> word{0};

double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Rewrite {
  double after_read_us = -1, own_us = -1;  // -1: the reader could not be pinned
};

// The calling thread (pinned) writes a 1 MiB buffer, a reader pinned to `cpu` sums it, and the
// writer times writing it again; then the writer times a rewrite of lines only it touched.
Rewrite rewrite_after_read(int cpu) {
  constexpr size_t kBytes = size_t(1) << 20;
  constexpr int kRepeats = 15;
  std::vector<uint64_t> buf(kBytes / sizeof(uint64_t));
  // 3: the reader is starting; 1: read the buffer; 2: stop; the reader sets 0 when ready or
  // done, -1 if it could not be pinned.
  std::atomic<int> cmd{3};
  std::thread reader([&] {
    if (!pin(cpu)) {
      cmd.store(-1, std::memory_order_release);
      return;
    }
    cmd.store(0, std::memory_order_release);
    for (;;) {
      int c;
      while ((c = cmd.load(std::memory_order_acquire)) == 0) {
      }
      if (c == 2) return;
      uint64_t sum = 0;
      for (uint64_t x : buf) sum += x;
      static volatile uint64_t sink;
      sink = sum;
      cmd.store(0, std::memory_order_release);
    }
  });
  const auto wait_reader = [&] {
    int c;
    while ((c = cmd.load(std::memory_order_acquire)) > 0) {
    }
    return c == 0;
  };
  Rewrite r;
  if (!wait_reader()) {
    reader.join();
    return r;
  }
  std::vector<double> after, own;
  for (int i = 0; i < kRepeats; ++i) {
    std::memset(buf.data(), i, kBytes);
    cmd.store(1, std::memory_order_release);
    wait_reader();
    auto t0 = std::chrono::steady_clock::now();
    std::memset(buf.data(), i + 1, kBytes);
    after.push_back(micros_since(t0));
    t0 = std::chrono::steady_clock::now();
    std::memset(buf.data(), i + 2, kBytes);
    own.push_back(micros_since(t0));
  }
  cmd.store(2, std::memory_order_release);
  reader.join();
  return {median(after), median(own)};
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 200000;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: memlane-core-latency [rounds=200000]\n");
    return 2;
  }
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    std::perror("memlane-core-latency: sched_getaffinity");
    return 1;
  }
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  if (found < 2) {
    std::fprintf(stderr, "memlane-core-latency: this process may run on one CPU only\n");
    return 2;
  }
  std::atomic<int> echo_pinned{0};  // 1: pinned, -1: could not be
  std::thread echo([&] {
    echo_pinned.store(pin(cpus[1]) ? 1 : -1);
    if (echo_pinned.load() < 0) return;
    for (long i = 0; i < rounds; ++i) {
      for (long w; (w = word.load(std::memory_order_acquire)) != 2 * i + 1;)
        if (w < 0) return;  // the main thread could not pin itself
      word.store(2 * i + 2, std::memory_order_release);
    }
  });
  const bool pinned = pin(cpus[0]);
  while (echo_pinned.load() == 0) {
  }
  if (!pinned || echo_pinned.load() < 0) {
    word.store(-1, std::memory_order_release);
    echo.join();
    std::fprintf(stderr, "memlane-core-latency: could not pin a thread to cpu %d or %d\n", cpus[0], cpus[1]);
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < rounds; ++i) {
    word.store(2 * i + 1, std::memory_order_release);
    while (word.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  echo.join();
  std::printf("cpu %d-%d round trip %.1f ns\n", cpus[0], cpus[1], ns / double(rounds));
  const Rewrite r = rewrite_after_read(cpus[1]);
  if (r.after_read_us < 0) {
    std::fprintf(stderr, "memlane-core-latency: could not pin a thread to cpu %d\n", cpus[1]);
    return 1;
  }
  std::printf("rewrite 1 MiB after cpu %d read it %.1f us, own lines %.1f us\n", cpus[1], r.after_read_us, r.own_us);
  return 0;
}
