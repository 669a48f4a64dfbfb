#include "cpu/thread_pool.h"

namespace memlane::cpu {

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
  if (done_.load(std::memory_order_acquire) == chunks) return;
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == chunks; });
}

void ThreadPool::worker_loop(int) {
  uint32_t seen = 0;
  for (;;) {
    Fn fn;
    void* ctx;
    int64_t n, chunks;
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
