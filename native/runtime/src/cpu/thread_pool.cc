#include "cpu/thread_pool.h"

#include "cpu/env_count.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MEMLANE_CPU_RELAX() _mm_pause()
#else
#define MEMLANE_CPU_RELAX() ((void)0)
#endif

namespace memlane::cpu {
namespace {

// How long a worker keeps polling for the next parallel_for after one ends, and the caller for
// a worker's last chunk, before sleeping on the condition variable: MEMLANE_POOL_SPIN_US,
// default 100. A network's kernels come microseconds apart, and a futex sleep + wake costs
// tens of microseconds, by which time the caller has run the worker's chunks itself (ONNX
// Runtime's pool spins likewise). Batch 1, 2 threads, p50 at 0 / 30 / 100 / 300 us, load
// average 1.45 on 2 cores: mobilenet_v2 10.2 / 7.5 / 7.5 / 5.7 ms, regnet_x_400mf 14.0 /
// 11.7 / 10.5 / 10.0 ms. The price: on a machine whose cores are all taken by other jobs a
// polling worker holds a core the calling thread then lacks (load average 3.3:
// mobilenet_v3_small 3.3 / 3.6 / 4.0 / 4.5 ms at 0 / 10 / 30 / 100 us).
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds t{env_count("MEMLANE_POOL_SPIN_US", 100)};
  return t;
}

// Polls done() until it holds or the spin time passed; true if it held.
template <typename Pred>
bool spin_until(const Pred& done) {
  if (spin_time().count() == 0) return done();
  const auto until = std::chrono::steady_clock::now() + spin_time();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      MEMLANE_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_claimed(uint32_t gen, int64_t n, int64_t chunks, Fn fn, void* ctx) {
  const uint64_t tag = uint64_t(gen) << 32;
  uint64_t v = claim_.load(std::memory_order_acquire);
  for (;;) {
    if ((v & ~uint64_t(0xFFFFFFFF)) != tag) return;  // a later call: not ours to run
    const int64_t c = int64_t(v & 0xFFFFFFFF);
    if (c >= chunks) return;
    if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
    fn(ctx, n * c / chunks, n * (c + 1) / chunks);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      // Taking the lock orders this notify after the caller's predicate check.
      { std::lock_guard<std::mutex> lk(mu_); }
      cv_done_.notify_one();
    }
    v = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run_chunks(int64_t n, int64_t chunks, Fn fn, void* ctx) {
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunks_ = chunks;
    gen = ++generation_;
    done_.store(0, std::memory_order_relaxed);
    claim_.store(uint64_t(gen) << 32, std::memory_order_release);
  }
  cv_work_.notify_all();
  // The caller takes chunks too; then it waits only for chunks that workers claimed.
  run_claimed(gen, n, chunks, fn, ctx);
  if (spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; })) return;
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == chunks; });
}

void ThreadPool::worker_loop(int) {
  uint32_t seen = 0;
  for (;;) {
    Fn fn;
    void* ctx;
    int64_t n, chunks;
    // The next call's generation shows in claim_'s high word; stop_ only under the lock.
    spin_until([&] { return uint32_t(claim_.load(std::memory_order_acquire) >> 32) != seen; });
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      ctx = ctx_;
      n = n_;
      chunks = chunks_;
    }
    run_claimed(seen, n, chunks, fn, ctx);
  }
}

}  // namespace memlane::cpu
