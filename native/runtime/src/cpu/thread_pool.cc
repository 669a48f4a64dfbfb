#include "cpu/thread_pool.h"

#include "cpu/denormals.h"
#include "cpu/cpu_relax.h"
#include "cpu/env_count.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <dlfcn.h>
#include <sched.h>

#include <map>


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

// MEMLANE_POOL_YIELD=0 (an A/B aid): a polling thread never yields its CPU (below).
bool yield_enabled() {
  static const bool on = env_count("MEMLANE_POOL_YIELD", 1) != 0;
  return on;
}

// Polls done() until it holds or the spin time passed (and, with a hot flag, for as long as it
// is set); true if it held. `other`: the CPU of the thread it waits on (-1: unknown). A poller
// on that same CPU takes turns with the thread it waits for, each getting half the core, and
// the poll is the half that does nothing: it yields the CPU instead (squeezenet1_1, batch 1,
// both threads of 2 held on one CPU: 15.4 ms a run polling, against 7.0 ms for 1 thread).
template <typename Pred>
bool spin_until(const Pred& done, const std::atomic<int>* hot = nullptr, const std::atomic<int>* other = nullptr,
                std::atomic<uint64_t>* yields = nullptr) {
  const auto keep = [&] { return hot && hot->load(std::memory_order_relaxed) > 0; };
  if (spin_time().count() == 0 && !keep()) return done();
  auto until = std::chrono::steady_clock::now() + spin_time();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (other && yield_enabled() && sched_getcpu() == other->load(std::memory_order_relaxed)) {
      sched_yield();
      if (yields) yields->fetch_add(1, std::memory_order_relaxed);
    }
    const auto now = std::chrono::steady_clock::now();
    if (keep()) until = now + spin_time();  // the spin time counts from the end of the run
    else if (now >= until) return done();
  }
}

bool hot_enabled() {
  static const bool on = env_count("MEMLANE_POOL_HOT", 1) != 0;
  return on;
}

// MEMLANE_POOL_SKIP_STACKED=1 (off by default; a tuning aid): a worker that wakes on the CPU
// its caller is running on takes no chunk of that call (see worker_loop). Off because a call
// can be a whole batch: memlane-rt's batch lanes are one parallel_for of two lanes, so a skip
// there ran the batch on one thread (resnet18, batch 8, 2 threads, in a memlane-rt worker
// under `memlane compare`: 258 ms p50 with it, 153 without; 1 thread 254).
bool skip_stacked() {
  static const bool on = env_count("MEMLANE_POOL_SKIP_STACKED", 0) != 0;
  return on;
}

}  // namespace

int chunks_per_thread() {
  static const int k = int(std::clamp(env_count("MEMLANE_POOL_CHUNKS", 1), 1L, 64L));
  return k;
}

// MEMLANE_POOL_STATS=1 (a tuning aid): what the split cost, printed when the pool ends. Where
// a multi-threaded run loses time against the sum of its ops' best times: calls the caller
// ran alone (no worker came in time), time the caller waited for workers' chunks after its
// own, how often a thread gave up polling and slept on the condition variable, and how often a
// worker took a call's first chunk (the caller's, as a rule: a kernel's split keeps each thread
// on the data it wrote only while the same thread takes the same chunk).
struct PoolStats {
  std::atomic<uint64_t> calls{0}, chunks{0}, caller_chunks{0}, caller_alone{0}, caller_wait_ns{0}, caller_sleeps{0},
      worker_sleeps{0}, worker_skips{0}, yields{0}, worker_first{0};
  // MEMLANE_POOL_STATS=2 also: per call site (the kernel code that called parallel_for), the
  // mean time of the caller's chunks, of the last worker's chunks and the delay before it began
  // them, and the call's wall time; printed as offsets into the binary for addr2line. How the
  // fills of padded inputs were found to take 2-4x their usual time on a split placement
  // (docs/native-cpu.md). With more than one worker only the last to finish is counted.
  struct Site {
    double caller_ns = 0, worker_ns = 0, delay_ns = 0, wall_ns = 0;
    uint64_t calls = 0, worker_calls = 0;
  };
  bool per_site = false;
  std::map<void*, Site> sites;                           // the caller's only
  std::atomic<int64_t> call_start{0}, worker_start{-1}, worker_ns{0};  // this call's worker
  std::atomic<uint32_t> worker_gen{0};  // the call (generation) worker_start and worker_ns are of
};

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  // (claim_ holds a chunk index in 16 bits)
  if (threads > 1) max_chunks_ = std::min<int64_t>(int64_t(threads) * chunks_per_thread(), 0xFFFF);
  const long stats = env_count("MEMLANE_POOL_STATS", 0);
  if (threads > 1 && stats >= 1) stats_ = new PoolStats;
  if (stats_) stats_->per_site = stats >= 2;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

int64_t ThreadPool::worker_sleeps() const { return stats_ ? int64_t(stats_->worker_sleeps.load()) : -1; }
int64_t ThreadPool::worker_skips() const { return stats_ ? int64_t(stats_->worker_skips.load()) : -1; }
int64_t ThreadPool::yields() const { return stats_ ? int64_t(stats_->yields.load()) : -1; }

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
  if (PoolStats* s = stats_) {
    const double calls = double(std::max<uint64_t>(1, s->calls));
    std::fprintf(stderr,
                 "[memlane pool] threads %d: %llu calls, %.2f chunks a call, caller ran %.1f%% of chunks, alone in "
                 "%.1f%% of calls, waited %.2f us a call; sleeps: caller %llu, workers %llu; calls a worker skipped "
                 "(on the caller's CPU) %llu; CPU yields while polling %llu; worker took chunk 0 in %llu\n",
                 threads(), (unsigned long long)s->calls.load(), double(s->chunks) / calls,
                 100.0 * double(s->caller_chunks) / double(std::max<uint64_t>(1, s->chunks)),
                 100.0 * double(s->caller_alone) / calls, double(s->caller_wait_ns) / 1e3 / calls,
                 (unsigned long long)s->caller_sleeps.load(), (unsigned long long)s->worker_sleeps.load(),
                 (unsigned long long)s->worker_skips.load(), (unsigned long long)s->yields.load(),
                 (unsigned long long)s->worker_first.load());
    for (const auto& [addr, x] : s->sites) {
      Dl_info info{};
      const bool found = dladdr(addr, &info) != 0 && info.dli_fname;
      const double wn = double(std::max<uint64_t>(1, x.worker_calls));
      std::fprintf(stderr,
                   "[memlane pool site] %s+0x%llx: %llu calls, us a call: caller %.1f, worker %.1f (began %.1f after), "
                   "wall %.1f\n",
                   found ? info.dli_fname : "?",
                   (unsigned long long)(uintptr_t(addr) - (found ? uintptr_t(info.dli_fbase) : 0)),
                   (unsigned long long)x.calls, x.caller_ns / 1e3 / double(x.calls), x.worker_ns / 1e3 / wn,
                   x.delay_ns / 1e3 / wn, x.wall_ns / 1e3 / double(x.calls));
    }
    delete s;
  }
}

int64_t ThreadPool::run_claimed(uint32_t gen, int64_t n, int64_t chunks, Fn fn, void* ctx, bool caller) {
  const uint64_t tag = uint64_t(gen) << 32;
  // The caller takes chunks from the front, workers from the back (claim_'s front and end):
  // with two threads each call's first chunks go to the caller and its last to the worker,
  // unless one of them ran out of its own and took the other's. MEMLANE_POOL_SAME_END=1: every thread from
  // the front, as before (an A/B aid).
  static const bool from_back = std::getenv("MEMLANE_POOL_SAME_END") == nullptr;
  const bool back = from_back && !caller;
  uint64_t v = claim_.load(std::memory_order_acquire);
  for (int64_t ran = 0;; ++ran) {
    if ((v & ~uint64_t(0xFFFFFFFF)) != tag) return ran;  // a later call: not ours to run
    const int64_t front = int64_t(v & 0xFFFF), end = int64_t((v >> 16) & 0xFFFF);
    if (front >= end) return ran;
    const int64_t c = back ? end - 1 : front;
    const uint64_t next = back ? v - (uint64_t(1) << 16) : v + 1;
    if (!claim_.compare_exchange_weak(v, next, std::memory_order_acq_rel)) {
      --ran;
      continue;
    }
    if (c == 0 && !caller && stats_) stats_->worker_first += 1;
    fn(ctx, n * c / chunks, n * (c + 1) / chunks);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      // Taking the lock orders this notify after the caller's predicate check.
      { std::lock_guard<std::mutex> lk(mu_); }
      cv_done_.notify_one();
    }
    v = claim_.load(std::memory_order_acquire);
  }
}

ThreadPool::Hot::Hot(ThreadPool& p) : p_(p) {
  if (hot_enabled()) p_.hot_.fetch_add(1, std::memory_order_relaxed);
}

ThreadPool::Hot::~Hot() {
  if (hot_enabled()) p_.hot_.fetch_sub(1, std::memory_order_relaxed);
}

void ThreadPool::run_chunks(int64_t n, int64_t chunks, Fn fn, void* ctx) {
  uint32_t gen;
  const int64_t c0 = stats_ && stats_->per_site ? now_ns() : 0;
  if (c0) {
    stats_->call_start.store(c0);
    stats_->worker_start.store(-1);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunks_ = chunks;
    const int cpu = sched_getcpu();
    caller_cpu_ = skip_stacked() ? cpu : -1;
    caller_on_.store(cpu, std::memory_order_relaxed);
    gen = ++generation_;
    done_.store(0, std::memory_order_relaxed);
    claim_.store(uint64_t(gen) << 32 | uint64_t(chunks) << 16, std::memory_order_release);
  }
  cv_work_.notify_all();
  // The caller takes chunks too; then it waits only for chunks that workers claimed.
  const int64_t ran = run_claimed(gen, n, chunks, fn, ctx, true);
  const int64_t c1 = c0 ? now_ns() : 0;
  const auto t0 = stats_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  const auto done = [&] { return done_.load(std::memory_order_acquire) == chunks; };
  const bool spun = spin_until(done, nullptr, &worker_on_, stats_ ? &stats_->yields : nullptr);
  if (!spun) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_done_.wait(lk, done);
  }
  if (PoolStats* s = stats_) {
    s->calls += 1;
    s->chunks += uint64_t(chunks);
    s->caller_chunks += uint64_t(ran);
    s->caller_alone += ran == chunks;
    s->caller_sleeps += !spun;
    s->caller_wait_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    if (c0) {
      PoolStats::Site& x = s->sites[__builtin_return_address(0)];
      x.calls += 1;
      x.caller_ns += double(c1 - c0);
      x.wall_ns += double(now_ns() - c0);
      // The worker publishes its times just after its last chunk counts as done: wait for them
      // a moment (stats only) where a worker ran any chunk.
      if (ran < chunks)
        for (const int64_t until = now_ns() + 20000; s->worker_start.load() < 0 && now_ns() < until;) cpu_relax();
      const int64_t began = s->worker_start.load();
      if (began >= 0 && s->worker_gen.load() == gen) {  // not a late report of the call before
        x.worker_calls += 1;
        x.delay_ns += double(began - c0);
        x.worker_ns += double(s->worker_ns.load());
      }
    }
  }
}

void ThreadPool::worker_loop(int) {
  DenormalsFlushed::set_for_this_thread();  // the pool only runs memlane-rt's kernels
  uint32_t seen = 0;
  bool stacked = false;  // skipped the last call: sleep at once instead of polling
  for (;;) {
    Fn fn;
    void* ctx;
    int64_t n, chunks;
    int caller_cpu;
    // The next call's generation shows in claim_'s high word; stop_ only under the lock.
    const auto next = [&] { return uint32_t(claim_.load(std::memory_order_acquire) >> 32) != seen; };
    const bool spun = stacked ? next() : spin_until(next, &hot_, &caller_on_, stats_ ? &stats_->yields : nullptr);
    if (!spun && stats_) stats_->worker_sleeps += 1;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      ctx = ctx_;
      n = n_;
      chunks = chunks_;
      caller_cpu = caller_cpu_;
    }
    // On a machine whose cores other jobs share, Linux often wakes a sleeping worker on its
    // waker's CPU: both pool threads then take turns on one core (squeezenet1_1, batch 1, 2
    // threads, 2 cores shared with other jobs: both runnable on the same CPU in 2214 of 2216
    // samples, p50 10.0 ms, 5.9 ms in a run where they stayed apart). A worker there can run
    // only while the caller does not: a chunk it claims keeps the caller polling, then asleep,
    // until the scheduler switches (tens to hundreds of microseconds a call), and its polling
    // takes the caller's time. So it leaves the call to the caller, which then runs as fast
    // as one thread, and sleeps until the next; a later wake-up may place it elsewhere.
    stacked = caller_cpu >= 0 && sched_getcpu() == caller_cpu;
    if (stacked) {
      if (stats_) stats_->worker_skips += 1;
      continue;
    }
    worker_on_.store(sched_getcpu(), std::memory_order_relaxed);
    const int64_t w0 = stats_ && stats_->per_site ? now_ns() : 0;
    const int64_t ran = run_claimed(seen, n, chunks, fn, ctx, false);
    if (w0 && ran > 0) {
      stats_->worker_gen.store(seen);
      stats_->worker_ns.store(now_ns() - w0);
      stats_->worker_start.store(w0);
    }
  }
}

}  // namespace memlane::cpu
