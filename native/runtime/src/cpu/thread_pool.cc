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

void ThreadPool::run_chunks(int64_t n, int64_t chunks, Fn fn, void* ctx) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunks_ = chunks;
    next_.store(0);
    pending_ = int(workers_.size());
    ++generation_;
  }
  cv_work_.notify_all();
  // The caller takes chunks too.
  for (int64_t c; (c = next_.fetch_add(1)) < chunks;) fn(ctx, n * c / chunks, n * (c + 1) / chunks);
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [this] { return pending_ == 0; });
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
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
    for (int64_t c; (c = next_.fetch_add(1)) < chunks;) fn(ctx, n * c / chunks, n * (c + 1) / chunks);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

}  // namespace memlane::cpu
