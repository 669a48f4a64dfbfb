// ThreadChoice (cpu/thread_choice.h): on a shared placement every run uses the pool; on a split
// one it times both modes per batch size, keeps the faster, tries the other now and then (two
// runs, the second timed; less often while it keeps losing, again soon when a new split stretch
// begins), and never switches on a difference inside the noise. The placement probe itself: a real 2-thread pool answers
// with a round trip (or no reading) and keeps running every chunk afterwards.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <cmath>

#include "cpu/thread_choice.h"
#include "cpu/thread_pool.h"
#include "harness.h"
#include "op_runner.h"

using memlane::cpu::ThreadChoice;
using memlane::cpu::ThreadPool;
using Mode = ThreadChoice::Mode;

static constexpr int64_t kShared = 55, kSplit = 330;

// Runs `n` picks at `batch` on the placement last noted, each recorded as taking the time
// `ns_of(mode)`; the modes picked.
template <typename F>
static std::vector<Mode> runs(ThreadChoice& c, int64_t batch, int n, const F& ns_of) {
  std::vector<Mode> picked;
  for (int i = 0; i < n; ++i) {
    const Mode m = c.decide(batch);
    c.record(batch, m, ns_of(m));
    picked.push_back(m);
  }
  return picked;
}

static int count(const std::vector<Mode>& v, Mode m) {
  int n = 0;
  for (Mode x : v) n += x == m;
  return n;
}

static void only_two_threads_and_the_switch() {
  unsetenv("MEMLANE_SPLIT_ADAPT");
  CHECK(!ThreadChoice(1).enabled());
  CHECK(ThreadChoice(2).enabled());
  CHECK(!ThreadChoice(4).enabled());  // one thread of four is another trade, never measured
  setenv("MEMLANE_SPLIT_ADAPT", "0", 1);
  ThreadChoice off(2);
  CHECK(!off.enabled());
  off.note_round_trip(kSplit);
  CHECK(off.decide(1) == ThreadChoice::kPool);
  unsetenv("MEMLANE_SPLIT_ADAPT");
}

static void shared_always_pool() {
  ThreadChoice c(2);
  c.note_round_trip(kShared);
  const auto picked = runs(c, 1, 200, [](Mode m) { return m == ThreadChoice::kPool ? 9'000'000 : 1'000; });
  CHECK(count(picked, ThreadChoice::kCaller) == 0);
  CHECK(c.split_runs() == 0);  // shared runs are not timed for the split decision
  c.note_round_trip(-1);       // no reading keeps the last one
  CHECK(c.decide(1) == ThreadChoice::kPool);
}

static void split_learns_the_faster_and_backs_off() {
  ThreadChoice c(2);
  c.note_round_trip(kSplit);
  // caller alone 6.5 ms, the pool 8.2 ms: squeezenet1_1 on a split placement
  const auto slowPool = [](Mode m) { return m == ThreadChoice::kPool ? 8'200'000 : 6'500'000; };
  // both timed first: the pool, then a try of the caller alone (two runs, the second timed)
  const auto first = runs(c, 1, 3, slowPool);
  CHECK(first[0] == ThreadChoice::kPool && first[1] == ThreadChoice::kCaller && first[2] == ThreadChoice::kCaller);
  const auto settled = runs(c, 1, 1000, slowPool);
  const int pool = count(settled, ThreadChoice::kPool);
  // tries of the pool, two runs each: after 8, 16, 32 ... 512 runs, about 1 % of the runs
  CHECK_MSG(pool >= 6 && pool <= 16, std::to_string(pool) + " pool runs of 1000");
  CHECK(c.split_runs() == 1003 && c.caller_runs() == 1003 - 1 - pool);
  // the pool becomes the faster (efficientnet_b0 keeps two threads): taken at its next try
  const auto fastPool = [](Mode m) { return m == ThreadChoice::kPool ? 9'700'000 : 11'500'000; };
  const auto after = runs(c, 1, 600, fastPool);
  CHECK_MSG(count(after, ThreadChoice::kPool) > 500, std::to_string(count(after, ThreadChoice::kPool)) + " pool runs of 600");
  CHECK(after.back() == ThreadChoice::kPool);
}

static void noise_does_not_switch_and_batches_are_apart() {
  ThreadChoice c(2);
  c.note_round_trip(kSplit);
  // 3 % apart: inside kSwitchBelow, so the pool (timed first) stays
  const auto close = [](Mode m) { return m == ThreadChoice::kPool ? 1'030'000 : 1'000'000; };
  const auto picked = runs(c, 1, 300, close);
  CHECK_MSG(count(picked, ThreadChoice::kCaller) <= 14, std::to_string(count(picked, ThreadChoice::kCaller)) + " caller runs of 300");
  CHECK(picked.back() == ThreadChoice::kPool);
  // batch 8 is timed on its own: the caller alone wins there
  const auto b8 = runs(c, 8, 100, [](Mode m) { return m == ThreadChoice::kPool ? 20'000'000 : 10'000'000; });
  CHECK(count(b8, ThreadChoice::kCaller) > 85);
  CHECK(c.decide(1) == ThreadChoice::kPool);
}

static void a_new_split_stretch_tries_again_soon() {
  using std::chrono::milliseconds;
  const auto t0 = std::chrono::steady_clock::now();
  const auto slowPool = [](Mode m) { return m == ThreadChoice::kPool ? 8'000'000 : 6'000'000; };
  ThreadChoice c(2);
  c.note_round_trip(kSplit, t0);
  runs(c, 1, 1000, slowPool);  // the pool's tries are 512 runs apart by now
  c.note_round_trip(kShared, t0 + milliseconds(1500));
  CHECK(c.decide(1) == ThreadChoice::kPool);
  c.note_round_trip(kSplit, t0 + milliseconds(3000));
  const auto again = runs(c, 1, 10, slowPool);
  CHECK_MSG(count(again, ThreadChoice::kPool) >= 1, "no try of the pool in the first 10 runs of a new split stretch");

  // Readings either side of the line within a second are one stretch: no tries restart.
  ThreadChoice d(2);
  d.note_round_trip(kSplit, t0);
  runs(d, 1, 1000, slowPool);
  for (int i = 1; i <= 40; ++i) d.note_round_trip(i % 2 ? kShared : kSplit, t0 + milliseconds(20 * i));
  const auto flips = runs(d, 1, 10, slowPool);
  CHECK_MSG(count(flips, ThreadChoice::kPool) == 0, "readings flipping within a second restarted the tries");

  // Split readings far apart with no shared one between (sparse requests) are one stretch too.
  ThreadChoice e(2);
  e.note_round_trip(kSplit, t0);
  runs(e, 1, 1000, slowPool);
  e.note_round_trip(kSplit, t0 + milliseconds(5000));
  const auto sparse = runs(e, 1, 10, slowPool);
  CHECK_MSG(count(sparse, ThreadChoice::kPool) == 0, "a split reading after a quiet spell restarted the tries");
}

static void the_line_between_shared_and_split() {
  // An Intel Xeon's two cores on its mesh (138-180 ns) count as shared: two threads win there.
  ThreadChoice c(2);
  c.note_round_trip(180);
  CHECK(!c.split());
  c.note_round_trip(240);  // the AMD EPYC's split placement began at 240
  CHECK(c.split());
}

static void the_probe_on_a_real_pool() {
  ThreadPool one(1);
  CHECK(memlane::cpu::caller_worker_round_trip_ns(one, 8) == -1);
  ThreadPool two(2);
  for (int i = 0; i < 50; ++i) {
    const int64_t rt = memlane::cpu::caller_worker_round_trip_ns(two, 8);
    // a reading (tens to hundreds of ns; up to a scheduler slice when both threads share a
    // CPU), or none when the worker did not join in time: never 0 or absurd
    CHECK_MSG(rt == -1 || (rt > 0 && rt < 100'000'000), "round trip " + std::to_string(rt));
    std::vector<std::atomic<int>> hits(64);
    two.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) hits[size_t(k)].fetch_add(1);
    });
    int bad = 0;
    for (auto& h : hits) bad += h.load() != 1;
    CHECK_MSG(bad == 0, std::to_string(bad) + " items not run once after a probe");
  }
}

// The CPU backend's wiring, on any machine: with every reading taken as split
// (MEMLANE_SPLIT_ADAPT=2) a 2-thread backend at batch 1 runs some requests on the caller alone
// (at least the first try), says so in its notes, and every run gives one thread's outputs.
static void the_backend_runs_on_the_caller_alone_when_split() {
  using namespace memlane;
  mltest::PlanBuilder b;
  mltest::Rng r;
  const int x = b.input("x", {16, 24, 24});
  const int w = b.weight("w", {32, 16, 3, 3}, r.vec(32 * 16 * 9));
  const int y = b.act("y", {32, 24, 24});
  const int yr = b.act("yr", {32, 24, 24});
  const int out = b.output("out", {32, 1, 1});
  b.op("Conv", {x, w, -1}, {y}, {{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{1, 1}},
                                 {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"activation", std::string("none")}});
  b.op("Relu", {y}, {yr});
  b.op("GlobalAveragePool", {yr}, {out});
  const std::vector<uint8_t> bytes = b.build();
  Plan plan;
  std::string msg;
  CHECK(parse_plan(bytes.data(), bytes.size(), &plan, &msg) == Status::kOk);
  const std::vector<float> in = r.vec(16 * 24 * 24);
  const auto outputs = [&](int threads, int runs, std::string* notes) {
    Status st = Status::kOk;
    BackendOptions o;
    o.threads = threads;
    auto be = make_cpu_backend(o, &st, &msg);
    std::vector<std::vector<float>> all;
    if (!be || be->prepare(plan, 1, &msg) != Status::kOk) return all;
    for (int i = 0; i < runs; ++i) {
      std::vector<float> got(32, -1.f);
      const float* ip = in.data();
      float* op = got.data();
      CHECK_MSG(be->run(1, &ip, &op, &msg) == Status::kOk, msg);
      all.push_back(got);
    }
    *notes = be->notes();
    return all;
  };
  std::string notes;
  unsetenv("MEMLANE_SPLIT_ADAPT");
  const auto ref = outputs(1, 1, &notes);
  setenv("MEMLANE_SPLIT_ADAPT", "2", 1);
  const auto got = outputs(2, 24, &notes);
  unsetenv("MEMLANE_SPLIT_ADAPT");
  CHECK(ref.size() == 1 && got.size() == 24);
  float worst = 0;
  for (const auto& g : got)
    for (size_t k = 0; k < g.size() && !ref.empty(); ++k) worst = std::max(worst, std::fabs(g[k] - ref[0][k]));
  CHECK_MSG(worst <= 1e-4f, "max abs diff " + std::to_string(worst) + " against one thread");
  // the placement is read after the first run: the other 23 ran on a split one
  CHECK_CONTAINS(notes, "23 runs while the 2 CPUs shared no cache");
  // the try of the caller alone (two runs) comes right after the pool's first run
  const size_t at = notes.find("no cache, ");
  const int caller = at == std::string::npos ? 0 : std::atoi(notes.c_str() + at + 10);
  CHECK_MSG(caller >= 2, notes);
}

int main() {
  only_two_threads_and_the_switch();
  shared_always_pool();
  split_learns_the_faster_and_backs_off();
  noise_does_not_switch_and_batches_are_apart();
  a_new_split_stretch_tries_again_soon();
  the_line_between_shared_and_split();
  the_probe_on_a_real_pool();
  the_backend_runs_on_the_caller_alone_when_split();
  return mltest::finish("thread_choice_test");
}
