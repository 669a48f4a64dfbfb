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

struct PoolStats;  // thread_pool.cc

// Chunks a parallel_for may make per pool thread: MEMLANE_POOL_CHUNKS, default 1 (an A/B
// aid: more, smaller chunks let the caller take over more of the work of a worker that is
// late or preempted; squeezenet1_1 at batch 1 measured no clear difference at 4). Read once
// per process.
int chunks_per_thread();

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 1: everything runs on the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }
  // Times a worker went to sleep waiting for a call, and calls a worker left to the caller for
  // running on its CPU (MEMLANE_POOL_SKIP_STACKED=1; it then sleeps at once): -1 unless
  // MEMLANE_POOL_STATS=1 was set when the pool was made.
  int64_t worker_sleeps() const;
  int64_t worker_skips() const;
  // Times a polling thread yielded its CPU to the thread it waited for, sharing that CPU
  // (spin_until; MEMLANE_POOL_YIELD=0: never): -1 unless MEMLANE_POOL_STATS=1 as above.
  int64_t yields() const;

  // While one is alive, the workers poll for the next parallel_for without time limit instead
  // of sleeping after the spin time (MEMLANE_POOL_HOT=0: never; an A/B aid). The CPU backend
  // holds one for each run: inside an inference, a worker that slept through a serial stretch
  // longer than the spin time was woken for the next parallel op, and Linux often wakes a
  // sleeping thread on its waker's CPU, where the two pool threads then take turns on one core.
  class Hot {
   public:
    explicit Hot(ThreadPool& p);
    ~Hot();
    Hot(const Hot&) = delete;
    Hot& operator=(const Hot&) = delete;

   private:
    ThreadPool& p_;
  };

  // Calls body(begin, end) over [0, n) split into at most threads() x chunks_per_thread()
  // chunks of at least `grain` items each (n <= threads(): at most one item a chunk, so a
  // caller that passes one item a thread may give chunk k scratch slot k). Blocks until every
  // chunk ran. Chunks are claimed from one atomic word, so the caller waits only for chunks a
  // worker actually claimed: a worker that wakes after the caller ran every chunk itself costs
  // the caller nothing, and one that wakes late or is preempted holds up at most one chunk.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, const F& body) {
    if (n <= 0) return;
    int64_t chunks = grain > 0 ? (n + grain - 1) / grain : n;
    if (chunks > max_chunks_) chunks = max_chunks_;
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
  // Claims and runs chunks of generation `gen` until none is left (or a later generation
  // began: a late worker must not run the next call's chunks with this call's body).
  // Returns how many it ran. `caller`: run by the calling thread, not a worker (for the stats).
  int64_t run_claimed(uint32_t gen, int64_t n, int64_t chunks, Fn fn, void* ctx, bool caller);

  std::vector<std::thread> workers_;
  int64_t max_chunks_ = 1;  // threads() x chunks_per_thread(); 1 with one thread
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  uint32_t generation_ = 0;
  bool stop_ = false;
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunks_ = 0;
  // The generation in the high 32 bits; the chunks not yet claimed, [front, end), in bits 0-15
  // (front) and 16-31 (end); a call has at most 0xFFFF chunks (max_chunks_).
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};  // chunks of the current call that finished
  std::atomic<int> hot_{0};       // Hot guards alive: workers poll without sleeping
  int caller_cpu_ = -1;           // the CPU the current call's caller ran on (under mu_; worker_loop)
  // Where the last call's caller, and the last worker to take a call, were when they began: a
  // thread polling for the other yields its CPU when it is on the same one (spin_until).
  std::atomic<int> caller_on_{-1};
  std::atomic<int> worker_on_{-1};
  PoolStats* stats_ = nullptr;    // MEMLANE_POOL_STATS=1 (2: per call site): printed at destruction
};

}  // namespace memlane::cpu
