// A fixed pool of worker threads for the CPU backend's own loops (elementwise, pooling,
// conv over samples), like ONNX Runtime's intra-op pool. parallel_for never allocates:
// the body is passed by pointer and type-erased through a plain function pointer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace memlane::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 1: everything runs on the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }

  // Calls body(begin, end) over [0, n) split into at most threads() chunks of at least
  // `grain` items each. Blocks until every chunk ran.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, const F& body) {
    if (n <= 0) return;
    int64_t chunks = grain > 0 ? (n + grain - 1) / grain : n;
    if (chunks > threads()) chunks = threads();
    if (chunks <= 1) {
      body(int64_t(0), n);
      return;
    }
    run_chunks(n, chunks, &invoke<F>, const_cast<void*>(static_cast<const void*>(&body)));
  }

 private:
  using Fn = void (*)(void*, int64_t, int64_t);
  template <typename F>
  static void invoke(void* ctx, int64_t b, int64_t e) {
    (*static_cast<const F*>(ctx))(b, e);
  }
  void run_chunks(int64_t n, int64_t chunks, Fn fn, void* ctx);
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_{0};
  int pending_ = 0;
};

}  // namespace memlane::cpu
