// ThreadPool::parallel_for under many short calls: every item of every call runs exactly once
// and the call returns only after all of them ran, whether a worker woke in time or the caller
// claimed every chunk itself (chunks are claimed from one atomic word tagged with the call's
// generation, so a worker that wakes late must not run the next call's chunks; the caller takes
// them from the front, workers from the back).
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cpu/env_count.h"
#include "cpu/thread_pool.h"
#include "harness.h"

using memlane::cpu::ThreadPool;
using mltest::finish;

static void many_short_calls(int threads, int calls, int64_t n) {
  ThreadPool pool(threads);
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  int bad = 0;
  for (int call = 0; call < calls; ++call) {
    for (auto& h : hits) h.store(0, std::memory_order_relaxed);
    const int want = call + 1;  // distinct per call: a stale body would write the wrong value
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(want, std::memory_order_relaxed);
    });
    for (auto& h : hits)
      if (h.load(std::memory_order_relaxed) != want) ++bad;
  }
  CHECK_MSG(bad == 0, std::to_string(bad) + " items not run exactly once (threads " + std::to_string(threads) +
                          ", n " + std::to_string(n) + ")");
}

// The tuning variables' reading rule (env_count.h): whole numbers >= 0, anything else the default.
static void env_counts() {
  using memlane::cpu::env_count;
  const char* kVar = "MEMLANE_TEST_ENV_COUNT";
  unsetenv(kVar);
  CHECK(env_count(kVar, 7) == 7);
  for (const char* bad : {"abc", "-3", "1e3", "4x", "", " 5", "+2", "99999999999999999999999"}) {
    setenv(kVar, bad, 1);
    CHECK_MSG(env_count(kVar, 7) == 7, std::string("\"") + bad + "\" read as a number");
  }
  setenv(kVar, "0", 1);
  CHECK(env_count(kVar, 7) == 0);
  setenv(kVar, "250", 1);
  CHECK(env_count(kVar, 7) == 250);
  unsetenv(kVar);
}

// A worker that runs on its caller's CPU takes no chunk (thread_pool.cc, worker_loop): with
// this thread and the pool's worker (which inherits the mask) allowed one CPU only, every chunk
// of every call runs on the caller. Without the rule the worker, woken on that CPU, takes
// chunks whenever the scheduler lets it in before the caller claimed them (run with
// MEMLANE_POOL_SKIP_STACKED=0, the default, it fails; main turns the rule on for the run).
static void stacked_worker_leaves_the_call() {
  cpu_set_t old, one;
  if (sched_getaffinity(0, sizeof old, &old) != 0) return;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  int on_worker = 0;
  {
    ThreadPool pool(2);
    const auto caller = std::this_thread::get_id();
    std::atomic<int> other{0};
    for (int call = 0; call < 300; ++call)
      pool.parallel_for(2, 1, [&](int64_t, int64_t) {
        volatile double acc = 0;
        for (int k = 0; k < 20000; ++k) acc = acc + k;
        if (std::this_thread::get_id() != caller) other.fetch_add(1);
      });
    on_worker = other.load();
  }
  sched_setaffinity(0, sizeof old, &old);
  CHECK_MSG(on_worker == 0, std::to_string(on_worker) + " chunks ran on a worker sharing the caller's CPU");
}

// While a Hot guard lives the worker polls through a serial stretch far longer than the spin
// time instead of sleeping (and being woken, perhaps on the caller's CPU); without one it sleeps.
// (A worker that found itself on the caller's CPU skips the call and sleeps at once: main turns
// that rule on, and under load it fires, so those sleeps are not counted.)
static void hot_worker_stays_awake() {
  setenv("MEMLANE_POOL_STATS", "1", 1);  // read by each pool's constructor
  for (bool hot : {true, false}) {
    ThreadPool pool(2);
    std::unique_ptr<ThreadPool::Hot> guard(hot ? new ThreadPool::Hot(pool) : nullptr);
    pool.parallel_for(2, 1, [](int64_t, int64_t) {});  // the worker may have slept before this
    const int64_t sleeps = pool.worker_sleeps(), skips = pool.worker_skips();
    for (int call = 0; call < 5; ++call) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // 50x the default spin time
      pool.parallel_for(2, 1, [](int64_t, int64_t) {});
    }
    const int64_t slept = pool.worker_sleeps() - sleeps, skipped = pool.worker_skips() - skips;
    CHECK_MSG(hot ? slept == skipped : slept >= 1, std::string(hot ? "hot" : "not hot") + ": the worker slept " +
                                                       std::to_string(slept) + " times, " + std::to_string(skipped) + " of them after skipping a call");
  }
  unsetenv("MEMLANE_POOL_STATS");
}

// A thread that polls for another on the CPU that other runs on yields it (thread_pool.cc,
// spin_until): with this thread and the pool's worker held on one CPU and the worker kept
// polling (Hot), the worker waits for each call on the caller's CPU, and the caller for the
// worker's chunks on the worker's. Counted, not timed. Run alone (`thread_pool_test yield`):
// the main run turns on the skip rule, under which a stacked worker sleeps instead of polling.
static void stacked_poller_yields() {
  setenv("MEMLANE_POOL_STATS", "1", 1);
  cpu_set_t old, one;
  if (sched_getaffinity(0, sizeof old, &old) != 0) return;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  int64_t yields = -1;
  std::atomic<int64_t> sum{0};
  {
    ThreadPool pool(2);
    ThreadPool::Hot hot(pool);
    for (int call = 0; call < 200; ++call) {
      pool.parallel_for(2, 1, [&](int64_t b, int64_t e) {
        volatile double acc = 0;
        for (int k = 0; k < 20000; ++k) acc = acc + k;
        sum.fetch_add(e - b);
      });
      volatile double serial = 0;  // a serial stretch between calls, the worker polling
      for (int k = 0; k < 20000; ++k) serial = serial + k;
    }
    yields = pool.yields();
  }
  sched_setaffinity(0, sizeof old, &old);
  unsetenv("MEMLANE_POOL_STATS");
  CHECK(sum.load() == 400);
  CHECK_MSG(yields > 0, "a poller sharing its CPU with the thread it waits for yielded " + std::to_string(yields) + " times");
}

// The caller claims a call's chunks from the front, workers from the back: with two threads the
// first chunk runs on the caller in every call the worker takes part in, so each op's first part
// (and its data) stays on one core call after call. Chunk 0 waits for chunk 1 to start (up to
// 2 ms), so a worker that claims first would be seen running chunk 0.
static void caller_front_worker_back() {
  setenv("MEMLANE_POOL_STATS", "1", 1);  // read by the pool's constructor: counts the worker's skips
  ThreadPool pool(2);
  unsetenv("MEMLANE_POOL_STATS");
  ThreadPool::Hot hot(pool);
  const std::thread::id caller = std::this_thread::get_id();
  int both = 0, callerFirst = 0;
  // On a machine whose cores are busy with other work the worker may not be scheduled within
  // 2 ms in any of 300 calls (seen once in a CI rehearsal beside a benchmark): up to two more
  // rounds wait longer for it, so only a worker that never takes part fails.
  for (int round = 0, waitMs = 2; round < 3 && both == 0; ++round, waitMs *= 10) {
    for (int call = 0; call < (round == 0 ? 300 : 30); ++call) {
      std::atomic<bool> lastStarted{false};
      std::thread::id ran[2];
      pool.parallel_for(2, 1, [&](int64_t b, int64_t) {
        ran[b] = std::this_thread::get_id();
        if (b == 1) {
          lastStarted.store(true, std::memory_order_release);
          return;
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
        while (!lastStarted.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
        }
      });
      if (ran[0] != ran[1]) ++both, callerFirst += ran[0] == caller;
    }
  }
  // Where other jobs hold the other core the scheduler may wake the worker on the caller's CPU
  // in every call, and main's rule (MEMLANE_POOL_SKIP_STACKED) has it skip those calls: seen in a
  // CI rehearsal beside two benchmarks. A worker that neither took part nor skipped is the fault.
  if (std::thread::hardware_concurrency() >= 2)
    CHECK_MSG(both > 0 || pool.worker_skips() > 0, "the worker took no chunk in 360 calls and skipped none (" + std::to_string(pool.worker_skips()) + " skips)");
  CHECK_MSG(callerFirst == both, "the worker ran chunk 0 in " + std::to_string(both - callerFirst) + " of " +
                                     std::to_string(both) + " calls it took part in");
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "yield") {
    stacked_poller_yields();
    return finish("thread_pool_test yield");
  }
  setenv("MEMLANE_POOL_SKIP_STACKED", "1", 1);  // read once, at the first call of any pool
  env_counts();
  for (int threads : {2, 3}) {
    many_short_calls(threads, 100000, 2);  // one chunk a thread, bodies far shorter than a wake-up
    many_short_calls(threads, 20000, 7);   // uneven chunks
  }
  // A body slow enough that the workers do wake and take chunks.
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int call = 0; call < 200; ++call)
    pool.parallel_for(2, 1, [&](int64_t b, int64_t e) {
      volatile double acc = 0;
      for (int k = 0; k < 20000; ++k) acc = acc + k;
      sum.fetch_add(e - b);
    });
  CHECK(sum.load() == 400);
  stacked_worker_leaves_the_call();
  hot_worker_stays_awake();
  caller_front_worker_back();
  return finish("thread_pool_test");
}
