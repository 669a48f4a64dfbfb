// memlane-core-latency [rounds=200000]: the cache-line round trip between the first two CPUs
// this process may run on, two threads pinned one to each, bouncing one atomic word. Prints
// `cpu A-B round trip N ns` (one line; exit 2 with fewer than two CPUs, 1 when a thread cannot
// be pinned: two threads spinning on one CPU would take a time slice a round).
//
// Why: on a cloud VM the hypervisor moves the vCPUs between physical cores. On the 2-vCPU
// development machine the round trip is about 55 ns most of the time and about 320 ns for
// stretches of seconds (the vCPUs then sit on cores that share no cache), and a 2-thread run
// of a CNN takes 1.3-2.2x as long there, ONNX Runtime's 1.03-1.5x: docs/native-cpu.md, "Two
// threads on a split placement". bench:zoo runs this before and after each 2-thread round so
// that its table says which figures were taken on such a placement.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

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
  return 0;
}
