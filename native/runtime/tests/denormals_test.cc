// cpu/denormals.h: a run flushes denormals on its own thread and on the pool's workers (so no
// kernel pays Intel's microcode assists for them), and gives the caller its MXCSR back (the
// runtime runs inside Node and Python, whose float code keeps IEEE denormals). Run once as is
// and once with MEMLANE_KEEP_DENORMALS=1 (CMakeLists.txt), where denormals must pass through.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "cpu/thread_pool.h"
#include "op_runner.h"

using namespace memlane;
using namespace mltest;

namespace {

bool keep_denormals() {
  const char* k = std::getenv("MEMLANE_KEEP_DENORMALS");
  return k && std::strcmp(k, "1") == 0;
}

#if defined(__x86_64__) || defined(__i386__)
// y = x * 1 over a batch large enough that 2 threads split it: with the flush, a denormal x
// reads as 0 (DAZ); without it, it comes back as it went in.
void test_run_flushes_and_restores() {
  constexpr int64_t kWidth = 1 << 14;
  const float tiny = 1e-39f;  // denormal: under FLT_MIN (1.18e-38), not 0
  CHECK(tiny != 0.f && std::fabs(tiny) < 1.17549435e-38f);
  for (int threads : {1, 2}) {
    PlanBuilder b;
    int x = b.input("x", {1, kWidth});
    int one = b.weight("one", {kWidth}, std::vector<float>(size_t(kWidth), 1.f));
    int y = b.output("y", {1, kWidth});
    b.op("Mul", {x, one}, {y});
    const int64_t batch = 16;
    std::vector<float> in(size_t(batch * kWidth), tiny);
    const unsigned before = _mm_getcsr();
    RunResult r = run_plan(b, batch, {in}, threads);
    const unsigned after = _mm_getcsr();
    CHECK_MSG(r.status == Status::kOk, r.message);
    // The control bits (6-15: DAZ, exception masks, rounding, FTZ); bits 0-5 are sticky
    // exception flags, which any float work may raise.
    constexpr unsigned kControl = ~0x3Fu;
    CHECK_MSG((before & kControl) == (after & kControl), "the caller's MXCSR controls changed across the run: " +
                                                             std::to_string(before) + " -> " + std::to_string(after));
    CHECK_MSG((after & 0x8040u) == 0, "FTZ/DAZ left set on the caller's thread");
    const float want = keep_denormals() ? tiny : 0.f;
    size_t wrong = 0;
    for (float v : r.outputs[0]) wrong += v != want;
    CHECK_MSG(wrong == 0, std::to_string(wrong) + " of " + std::to_string(r.outputs[0].size()) + " outputs are not " +
                              (keep_denormals() ? "the denormal input" : "0") + " at " + std::to_string(threads) +
                              " thread(s)");
  }
}

// The pool's workers run with the flush for their whole life (a run's own guard only reaches
// the caller's thread): a body that reads MXCSR on whichever thread runs it. The caller's chunk
// waits (up to 50 ms a call) for a worker to take the other one: on a loaded 2-core machine
// (ctest's parallel jobs) a worker woke too late in all 300 calls of a busy loop, once in a CI
// rehearsal, and the caller ran both chunks itself.
void test_pool_workers_flush() {
  cpu::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_worker{0}, worker_flushing{0};
  for (int call = 0; call < 300 && on_worker.load() == 0; ++call)
    pool.parallel_for(2, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() == caller) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        while (on_worker.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        return;
      }
      on_worker.fetch_add(1);
      worker_flushing.fetch_add((_mm_getcsr() & 0x8040u) == 0x8040u);
    });
  CHECK_MSG(on_worker.load() > 0, "no chunk of 300 calls ran on the worker");
  const int want = keep_denormals() ? 0 : on_worker.load();
  CHECK_MSG(worker_flushing.load() == want, std::to_string(worker_flushing.load()) + " of " +
                                                std::to_string(on_worker.load()) + " worker chunks ran with FTZ/DAZ");
}
#endif

}  // namespace

int main() {
#if defined(__x86_64__) || defined(__i386__)
  test_run_flushes_and_restores();
  test_pool_workers_flush();
  return finish(keep_denormals() ? "denormals_test (kept)" : "denormals_test (flushed)");
#else
  std::printf("denormals_test: skipped (MXCSR is x86's)\n");
  return 0;
#endif
}
