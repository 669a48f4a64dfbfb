// Which pool a batch-1 run goes on when two threads share no cache (docs/native-cpu.md, "Two
// threads on a split placement"). A hypervisor may put the two vCPUs of a 2-thread run on
// cores that share no cache, for seconds to minutes at a time; then every store to a line the
// other core has read waits for that core (456-520 us a MiB against 84-115), and a batch-1 run,
// whose every op is split between the two threads, pays it on nearly all its output bytes:
// squeezenet1_1 8.2 ms on two threads there, 6.5 ms on one, 3.7 ms on two sharing a cache.
// Which of one or two threads wins on such a placement depends on the model (efficientnet_b0
// keeps two), so it is measured, not assumed.
//
// After a run it reads the placement (a cache-line round trip between the caller and the pool's
// worker, at most once every kProbeEveryMs): shared, every run uses the pool. Split, the runs
// time themselves per batch size and take the pool or the caller alone, whichever has been
// faster there, trying the other now and then (kTryRuns runs in a row after kExploreFirst split
// runs, the interval doubling while it keeps losing, up to kExploreMost, so that it costs no
// tail latency once settled).
//
// Only for a pool of exactly 2 threads: with more, one thread is a far larger step down, and a
// split among many cores was never measured. MEMLANE_SPLIT_ADAPT=0: always the pool (A/B aid);
// =2: every placement reading counts as split (ctest's way to run the choice on any machine).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace memlane::cpu {

class ThreadPool;

// Mean round trip of one cache line between the caller and a worker of `pool` over `rounds`
// exchanges, ns; -1 when the pool has one thread or the worker did not join within 20 us
// (asleep, or on the caller's own CPU: a split decision is then no better informed).
int64_t caller_worker_round_trip_ns(ThreadPool& pool, int rounds);

class ThreadChoice {
 public:
  enum Mode : int { kPool = 0, kCaller = 1 };

  // Above this round trip the two CPUs share no cache: on the AMD EPYC this was measured on,
  // 50-70 ns shared and 240-370 split. An Intel Xeon whose two vCPUs sit on two cores of its
  // mesh (no shared L2; a store to a line the other core read costs 3x, not 5x) reads 138-180
  // after a run (p10-p90 of 400 probes), and there two threads beat one on every zoo model: at
  // 150 half its readings counted as split, and each new stretch restarted the caller-alone
  // tries (16 of 200 runs of regnet_x_400mf went to the caller alone, at 1.7x the time).
  static constexpr int64_t kSplitRoundTripNs = 200;
  // A split reading after a shared one starts a new stretch (tries of the other mode again
  // soon) only when the last split reading is this long ago: a placement lasts seconds to
  // minutes, and readings either side of the line within a second are noise, not a move.
  static constexpr int kNewStretchAfterMs = 1000;
  static constexpr int kProbeEveryMs = 20;
  static constexpr int kExploreFirst = 8;
  static constexpr int kExploreMost = 512;
  // The other mode must be this much faster to take over (noise is a few %).
  static constexpr double kSwitchBelow = 0.92;
  // A try of the other mode is this many runs in a row, timed on the last: the first run after a
  // switch finds what it reads in the other core's cache (the half the other thread wrote, or
  // the whole arena), and squeezenet1_1's first run on the caller alone came out slower than the
  // pool's, its next ones 20 % faster.
  static constexpr int kTryRuns = 2;

  // `threads`: the pool's. Disabled (always kPool) unless 2, or under MEMLANE_SPLIT_ADAPT=0.
  explicit ThreadChoice(int threads);

  bool enabled() const { return enabled_; }
  // The mode for the next run at `batch`, on the placement last read.
  Mode decide(int64_t batch);
  // The run just made at `batch` in `mode` took `ns` (only runs made on a split placement count).
  void record(int64_t batch, Mode mode, int64_t ns);
  // Reads the placement on `pool` when due. Called after a run, while the pool's worker still
  // polls: at the start of one it may be asleep, and waking it costs more than the probe.
  void probe_if_due(ThreadPool& pool);
  // A placement reading (round trip, ns; < 0: none) taken at `at`, as probe_if_due takes it
  // (tests feed it).
  void note_round_trip(int64_t ns, std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now());

  // Runs that went to the caller alone, and runs made on a split placement (for the notes).
  int64_t caller_runs() const { return callerRuns_; }
  int64_t split_runs() const { return splitRuns_; }
  bool split() const { return split_; }

 private:
  struct PerBatch {
    int64_t batch = 0;               // 0: free slot
    double ns[2] = {-1, -1};         // smoothed run time of each mode on a split placement; -1 unknown
    Mode best = kPool;
    int sinceExplore = 0;
    int exploreEvery = kExploreFirst;
    int tryLeft = 0;                 // runs of the current try of the other mode still to make
  };
  PerBatch* slot(int64_t batch);

  // What the pending run is: the mode in use, or a run of a try (untimed, or the timed last one).
  enum class Run { kInUse, kTryWarm, kTryTimed };

  bool enabled_ = false;
  bool forceSplit_ = false;  // MEMLANE_SPLIT_ADAPT=2
  bool split_ = false;
  Run run_ = Run::kInUse;
  std::chrono::steady_clock::time_point lastProbe_{};
  std::chrono::steady_clock::time_point lastSplitReading_{};  // epoch: none yet
  bool sharedSinceSplit_ = false;                             // a shared reading since that one
  std::array<PerBatch, 8> batches_{};  // the batch sizes a worker runs: a handful
  int64_t callerRuns_ = 0, splitRuns_ = 0;
};

}  // namespace memlane::cpu
