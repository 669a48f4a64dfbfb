#include "cpu/thread_choice.h"

#include <algorithm>
#include <atomic>

#include "cpu/cpu_relax.h"
#include "cpu/env_count.h"
#include "cpu/thread_pool.h"

namespace memlane::cpu {

namespace {
using Clock = std::chrono::steady_clock;

// How long a side waits for the other: to join, then for each return of the line. The probe
// runs after a run, while the worker still polls; a worker that slept (the pool idle for more
// than its spin time) took over 300 us to join here, in 186 of 200 tries, so it is not waited for.
constexpr std::chrono::microseconds kJoinWait{20};
constexpr std::chrono::microseconds kExchangeWait{20};
constexpr int kProbeRounds = 8;
}  // namespace

int64_t caller_worker_round_trip_ns(ThreadPool& pool, int rounds) {
  if (pool.threads() < 2 || rounds < 1) return -1;
  alignas(64) std::atomic<int> ball{0};
  alignas(64) std::atomic<int> present{0};
  std::atomic<bool> gaveUp{false};
  int64_t total = -1;
  // Spins until `ready()`, false once either side gave up or `wait` passed (then it gives up).
  const auto await = [&](std::chrono::microseconds wait, auto ready) {
    const auto until = Clock::now() + wait;
    for (;;) {
      for (int i = 0; i < 32; ++i) {
        if (ready()) return true;
        if (gaveUp.load(std::memory_order_relaxed)) return false;
        cpu_relax();
      }
      if (Clock::now() >= until) {
        gaveUp.store(true, std::memory_order_relaxed);
        return false;
      }
    }
  };
  // Two chunks: side 0 serves the line and times it, side 1 returns it. If one thread claims
  // both (the worker never came), side 0 gives up waiting for side 1 and the call ends.
  pool.parallel_for(2, 1, [&](int64_t b, int64_t e) {
    for (int64_t side = b; side < e; ++side) {
      present.fetch_add(1, std::memory_order_acq_rel);
      if (!await(kJoinWait, [&] { return present.load(std::memory_order_acquire) == 2; })) return;
      if (side == 0) {
        const auto t0 = Clock::now();
        for (int r = 0; r < rounds; ++r) {
          ball.store(2 * r + 1, std::memory_order_release);
          if (!await(kExchangeWait, [&] { return ball.load(std::memory_order_acquire) == 2 * r + 2; })) return;
        }
        total = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      } else {
        for (int r = 0; r < rounds; ++r) {
          if (!await(kExchangeWait, [&] { return ball.load(std::memory_order_acquire) == 2 * r + 1; })) return;
          ball.store(2 * r + 2, std::memory_order_release);
        }
      }
    }
  });
  return total < 0 ? -1 : total / rounds;
}

ThreadChoice::ThreadChoice(int threads) {
  const int64_t adapt = env_count("MEMLANE_SPLIT_ADAPT", 1);
  enabled_ = threads == 2 && adapt != 0;
  forceSplit_ = adapt == 2;
}

ThreadChoice::PerBatch* ThreadChoice::slot(int64_t batch) {
  for (PerBatch& s : batches_)
    if (s.batch == batch) return &s;
  for (PerBatch& s : batches_)
    if (s.batch == 0) {
      s.batch = batch;
      return &s;
    }
  return nullptr;  // more batch sizes than slots: those run on the pool
}

void ThreadChoice::probe_if_due(ThreadPool& pool) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (now - lastProbe_ < std::chrono::milliseconds(kProbeEveryMs)) return;
  lastProbe_ = now;
  note_round_trip(forceSplit_ ? kSplitRoundTripNs + 1 : caller_worker_round_trip_ns(pool, kProbeRounds), now);
}

void ThreadChoice::note_round_trip(int64_t ns, Clock::time_point at) {
  if (ns < 0) return;  // no reading: keep what the last one said
  split_ = ns > kSplitRoundTripNs;
  if (!split_) {
    sharedSinceSplit_ = true;
    return;
  }
  // A new stretch: the first split reading, or one after a shared reading and a second of none.
  // (Split readings far apart with none shared between are one stretch: sparse requests.)
  const bool newStretch = lastSplitReading_ == Clock::time_point{} ||
                          (sharedSinceSplit_ && at - lastSplitReading_ >= std::chrono::milliseconds(kNewStretchAfterMs));
  lastSplitReading_ = at;
  sharedSinceSplit_ = false;
  if (newStretch)  // check the other mode again soon
    for (PerBatch& s : batches_) s.exploreEvery = kExploreFirst, s.sinceExplore = 0, s.tryLeft = 0;
}

ThreadChoice::Mode ThreadChoice::decide(int64_t batch) {
  run_ = Run::kInUse;
  if (!enabled_ || !split_) return kPool;
  PerBatch* s = slot(batch);
  if (!s) return kPool;
  // The pool timed first on this placement, then a try of the caller alone, then the faster,
  // with a try of the other now and then.
  if (s->ns[kPool] < 0) return kPool;
  if (s->tryLeft == 0 && (s->ns[kCaller] < 0 || ++s->sinceExplore >= s->exploreEvery)) {
    s->sinceExplore = 0;
    s->tryLeft = kTryRuns;
  }
  if (s->tryLeft == 0) return s->best;
  run_ = --s->tryLeft == 0 ? Run::kTryTimed : Run::kTryWarm;
  return s->best == kPool ? kCaller : kPool;
}

void ThreadChoice::record(int64_t batch, Mode mode, int64_t ns) {
  if (!enabled_ || !split_) return;  // runs on a shared placement say nothing about a split one
  ++splitRuns_;
  if (mode == kCaller) ++callerRuns_;
  PerBatch* s = slot(batch);
  if (!s || run_ == Run::kTryWarm) return;
  double& t = s->ns[mode];
  // A try's timed run replaces what that mode measured last, which may be from an earlier
  // stretch; the mode in use is smoothed over its runs.
  t = (t < 0 || run_ == Run::kTryTimed) ? double(ns) : 0.75 * t + 0.25 * double(ns);
  const double pool = s->ns[kPool], caller = s->ns[kCaller];
  if (pool < 0 || caller < 0) return;
  const Mode before = s->best;
  if (caller < kSwitchBelow * pool) s->best = kCaller;
  else if (pool < kSwitchBelow * caller) s->best = kPool;
  if (run_ == Run::kTryTimed) s->exploreEvery = s->best == before ? std::min(2 * s->exploreEvery, kExploreMost) : kExploreFirst;
}

}  // namespace memlane::cpu
