// The conv tuner (cpu/conv_tune.h): which candidate it keeps for given times (the rule's on a
// near tie), that a tuned backend computes what the rules' backend does (within the paths'
// rounding) at 1 and 2 threads and at batch 1 and 3, that a repeated shape takes the first
// one's choice without timing, that a choice off the rule's path (MEMLANE_CONV_TUNE_FORCE)
// frees the rule's kernels and still computes the same, that the plan pages of W its timing
// read go back to the file (and stay under MEMLANE_CPU_KEEP_WEIGHTS=1), that MEMLANE_CONV_TUNE=0 and
// BackendOptions::tuneConvs = false turn it off, and that the panel cache lets go of packs no
// kernel holds; and that it is off unless asked (BackendOptions::tuneConvs, MEMLANE_CONV_TUNE=1).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "harness.h"
#include "op_runner.h"
#include "cpu/conv_tune.h"
#include "cpu/cpu_features.h"
#include "cpu/simd/gemm_panels.h"
#include "memlane/runtime.h"

using namespace mltest;
using S = std::vector<int64_t>;

namespace {

Attrs conv3(int64_t stride, int64_t pad, const char* act) {
  return {{"kernel", S{3, 3}}, {"strides", S{stride, stride}}, {"pads", S{pad, pad, pad, pad}}, {"activation", std::string(act)}};
}

std::vector<float> scaled(std::vector<float> v, float k) {
  for (float& x : v) x *= k;
  return v;
}

struct Out {
  std::string notes;
  std::vector<std::vector<float>> y;  // per batch size asked
};

Out run(const PlanBuilder& pb, int threads, bool tune, const std::vector<int64_t>& batches, const std::vector<std::vector<float>>& xs) {
  using namespace memlane;
  Out o;
  BackendOptions opt;
  opt.threads = threads;
  opt.tuneConvs = tune;
  auto p = prepare_plan(pb, 3, opt);
  if (!p->backend) return o;
  auto& be = p->backend;
  std::string msg;
  o.notes = be->notes();
  for (size_t i = 0; i < batches.size(); ++i) {
    std::vector<float> y(size_t(batches[i]) * 64 * 6 * 6, -1.f);
    const float* in[] = {xs[i].data()};
    float* out[] = {y.data()};
    CHECK_MSG(be->run(batches[i], in, out, &msg) == Status::kOk, msg);
    o.y.push_back(std::move(y));
  }
  return o;
}

long rss_kib() {
  long kib = -1;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (!std::strncmp(line, "VmRSS:", 6)) kib = std::atol(line + 6);
    std::fclose(f);
  }
  return kib;
}

// RSS growth over Runtime::load of the plan file (KiB) and the backend's notes.
long load_growth_kib(const std::string& path, std::string* notes) {
  memlane::RuntimeOptions o;
  o.device = "cpu";
  o.threads = 1;
  memlane::RtError err;
  auto rt = memlane::Runtime::create(o, &err);
  CHECK_MSG(rt != nullptr, err.message);
  if (!rt) return -1;
  const long before = rss_kib();
  CHECK_MSG(rt->load(path, 1, &err), err.message);
  const long grew = rss_kib() - before;
  *notes = rt->notes();
  return grew;
}

}  // namespace

int main() {
  using memlane::cpu::pick_conv_candidate;
  // The fastest wins by more than the margin; a near tie keeps the rule's (index 0); an
  // unmeasured candidate (negative) never wins, nor does a faster one lose to it.
  CHECK(pick_conv_candidate({1.0, 0.9}, 0.05) == 1);
  CHECK(pick_conv_candidate({1.0, 0.97}, 0.05) == 0);
  CHECK(pick_conv_candidate({1.0, 1.2, 0.5, 0.7}, 0.05) == 2);
  CHECK(pick_conv_candidate({1.0, -1, 0.8}, 0.05) == 2);
  CHECK(pick_conv_candidate({1.0, -1}, 0.05) == 0);
  CHECK(pick_conv_candidate({-1, 2.0}, 0.05) == 1);
  CHECK(pick_conv_candidate({0.5}, 0.05) == 0);
  // Every path the tuner chooses among (direct, Winograd, pixel rows, flat) is an AVX-512 kernel
  // (conv.cc): elsewhere a conv has one candidate, the rule's, and nothing is timed or repacked.
  if (!memlane::cpu::use_avx512f()) {
    std::printf("conv_tune_test: no AVX-512 here (or MEMLANE_CPU_NO_AVX512): the tuner has one path a conv; backend cases skipped\n");
    return finish("conv_tune_test");
  }

  // A stem-like strided conv (direct or pixel rows), two 3x3 stride-1 convs of one shape and
  // activation on a 13x13 map (Winograd, direct, pixel rows, flat: the second takes the
  // first's choice), an Add + Relu on them, and a strided 3x3 to 6x6 (pixel rows, no other
  // tunable path). maxBatch 3 puts ops 1.. in the batch tail: both halves are tuned.
  Rng rng;
  PlanBuilder pb;
  const int x = pb.input("x", {3, 27, 27});
  const int w0 = pb.weight("w0", {64, 3, 3, 3}, rng.vec(64 * 3 * 9));
  const int b0 = pb.weight("b0", {64}, rng.vec(64));
  const int w1 = pb.weight("w1", {64, 64, 3, 3}, scaled(rng.vec(64 * 64 * 9), 0.05f));
  const int w2 = pb.weight("w2", {64, 64, 3, 3}, scaled(rng.vec(64 * 64 * 9), 0.05f));
  const int w3 = pb.weight("w3", {64, 64, 3, 3}, scaled(rng.vec(64 * 64 * 9), 0.05f));
  const int a = pb.act("a", {64, 13, 13}), c = pb.act("c", {64, 13, 13}), d = pb.act("d", {64, 13, 13});
  const int s = pb.act("s", {64, 13, 13}), r = pb.act("r", {64, 13, 13});
  const int y = pb.output("y", {64, 6, 6});
  pb.op("Conv", {x, w0, b0}, {a}, conv3(2, 0, "relu"));
  pb.op("Conv", {a, w1, -1}, {c}, conv3(1, 1, "relu"));
  pb.op("Conv", {c, w2, -1}, {d}, conv3(1, 1, "relu"));
  pb.op("Add", {d, a}, {s});
  pb.op("Relu", {s}, {r});
  pb.op("Conv", {r, w3, -1}, {y}, conv3(2, 0, "none"));

  const std::vector<int64_t> batches = {1, 3};
  const std::vector<std::vector<float>> xs = {rng.vec(3 * 27 * 27), rng.vec(3 * 3 * 27 * 27)};
  unsetenv("MEMLANE_CONV_TUNE");
  for (int threads : {1, 2}) {
    const std::string t = std::to_string(threads) + " thread(s)";
    const Out rules = run(pb, threads, false, batches, xs);
    const Out tuned = run(pb, threads, true, batches, xs);
    CHECK_MSG(rules.notes.find("conv tuning") == std::string::npos, t + ": untuned backend notes '" + rules.notes + "'");
    CHECK_MSG(tuned.notes.find("conv tuning: ") != std::string::npos, t + ": tuned backend notes '" + tuned.notes + "'");
    CHECK_MSG(tuned.notes.find("2 conv shapes timed") != std::string::npos &&
                  tuned.notes.find("1 convs took a timed shape's choice") != std::string::npos,
              t + ": " + tuned.notes);
    for (size_t i = 0; i < batches.size() && i < rules.y.size() && i < tuned.y.size(); ++i) {
      const float diff = max_abs_diff(rules.y[i], tuned.y[i]);
      CHECK_MSG(diff <= 1e-4f, t + ", batch " + std::to_string(batches[i]) + ": tuned vs rules max abs diff " + std::to_string(diff));
    }
  }

  // A repeated shape (the same conv twice, same epilogue) is timed once.
  {
    PlanBuilder rb;
    const int x2 = rb.input("x", {64, 13, 13});
    const int wa = rb.weight("wa", {64, 64, 3, 3}, scaled(rng.vec(64 * 64 * 9), 0.05f));
    const int wb = rb.weight("wb", {64, 64, 3, 3}, scaled(rng.vec(64 * 64 * 9), 0.05f));
    const int m = rb.act("m", {64, 13, 13});
    const int y2 = rb.output("y", {64, 13, 13});
    rb.op("Conv", {x2, wa, -1}, {m}, conv3(1, 1, "relu"));
    rb.op("Conv", {m, wb, -1}, {y2}, conv3(1, 1, "relu"));
    std::vector<uint8_t> bytes = rb.build();
    memlane::Plan plan;
    std::string msg;
    memlane::Status st = memlane::parse_plan(bytes.data(), bytes.size(), &plan, &msg);
    memlane::BackendOptions opt;
    opt.tuneConvs = true;
    auto be = memlane::make_cpu_backend(opt, &st, &msg);
    CHECK_MSG(be && be->prepare(plan, 1, &msg) == memlane::Status::kOk, msg);
    if (be) {
      const std::string n = be->notes();
      CHECK_MSG(n.find("1 conv shapes timed") != std::string::npos && n.find("1 convs took a timed shape's choice") != std::string::npos,
                "repeated shape: notes '" + n + "'");
    }
    // Off by default (BackendOptions{}), and MEMLANE_CONV_TUNE=0 turns it off whatever the
    // options say.
    {
      memlane::BackendOptions plain;
      auto dflt = memlane::make_cpu_backend(plain, &st, &msg);
      CHECK_MSG(dflt && dflt->prepare(plan, 1, &msg) == memlane::Status::kOk, msg);
      if (dflt) CHECK_MSG(dflt->notes().find("conv tuning") == std::string::npos, "default options: notes '" + dflt->notes() + "'");
    }
    setenv("MEMLANE_CONV_TUNE", "0", 1);
    auto off = memlane::make_cpu_backend(opt, &st, &msg);
    CHECK_MSG(off && off->prepare(plan, 1, &msg) == memlane::Status::kOk, msg);
    if (off) CHECK_MSG(off->notes().find("conv tuning") == std::string::npos, "MEMLANE_CONV_TUNE=0: notes '" + off->notes() + "'");
    unsetenv("MEMLANE_CONV_TUNE");
  }

  // Off the rule's path (MEMLANE_CONV_TUNE_FORCE): the rule's kernels (direct on the stem,
  // Winograd on the 13x13 convs) are freed and the forced ones kept, the repeated 13x13 shape
  // rebuilt with the same choice, and the outputs are the rules' still.
  setenv("MEMLANE_CONV_TUNE_FORCE", "pixel_rows", 1);
  for (int threads : {1, 2}) {
    const std::string t = std::to_string(threads) + " thread(s), forced pixel rows";
    const Out rules = run(pb, threads, false, batches, xs);
    const Out forced = run(pb, threads, true, batches, xs);
    CHECK_MSG(forced.notes.find("direct -> pixel_rows x1, winograd -> pixel_rows x1") != std::string::npos &&
                  forced.notes.find("1 convs took a timed shape's choice") != std::string::npos,
              t + ": notes '" + forced.notes + "'");
    for (size_t i = 0; i < batches.size() && i < rules.y.size() && i < forced.y.size(); ++i) {
      const float diff = max_abs_diff(rules.y[i], forced.y[i]);
      CHECK_MSG(diff <= 1e-4f, t + ", batch " + std::to_string(batches[i]) + ": max abs diff " + std::to_string(diff));
    }
  }

  unsetenv("MEMLANE_CONV_TUNE_FORCE");

  // The plan pages of W that the timed runs read go back to the file: a 512 -> 512 3x3 conv on
  // a 7x7 map (9 MiB of W; pixel rows by the rule, flat the other candidate), its plan in a
  // file (a read-only mapping, as memlane-rt loads every plan). Forced onto flat, which reads
  // W where pixel rows packs a copy, the load leaves neither W nor panels resident; with
  // MEMLANE_CPU_KEEP_WEIGHTS=1 (the backend gives no plan page back) it holds W.
  {
    PlanBuilder fb;
    const int fx = fb.input("x", {512, 7, 7});
    const int fw = fb.weight("w", {512, 512, 3, 3}, scaled(rng.vec(512 * 512 * 9), 0.01f));
    const int fy = fb.output("y", {512, 7, 7});
    fb.op("Conv", {fx, fw, -1}, {fy}, conv3(1, 1, "relu"));
    const std::vector<uint8_t> bytes = fb.build();
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/memlane-conv-tune-XXXXXX";
    std::vector<char> buf(path.begin(), path.end());
    buf.push_back('\0');
    const int fd = mkstemp(buf.data());
    CHECK(fd >= 0);
    if (fd >= 0) {
      path = buf.data();
      CHECK(write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
      close(fd);
      const long w_kib = 512L * 512 * 9 * 4 / 1024;
      std::string notes;
      // A first load grows the process by about 9 MiB whatever it keeps (measured here: a flat
      // load 9220 KiB first, 4 KiB second), so the loads measured come after one.
      setenv("MEMLANE_CONV_TUNE", "0", 1);
      load_growth_kib(path, &notes);
      setenv("MEMLANE_CONV_TUNE", "1", 1);  // (a Runtime's backends tune only when asked)
      setenv("MEMLANE_CONV_TUNE_FORCE", "flat", 1);
      long given_back = load_growth_kib(path, &notes);
      // Once in a CI rehearsal (an AMD EPYC, kernel 6.18) this load grew 9220 KiB, as a first
      // load does, where six runs by hand grew a few KiB: the machine's page cache, not the
      // backend (docs/memory.md, "A small process's RSS moves with the machine's page cache").
      // A second load tells them apart; a backend that kept W would grow by it both times.
      if (given_back >= w_kib / 3) given_back = std::min(given_back, load_growth_kib(path, &notes));
      CHECK_MSG(notes.find("pixel_rows -> flat x1") != std::string::npos, "file plan: notes '" + notes + "'");
      CHECK_MSG(given_back < w_kib / 3, "flat on a file plan: the load grew " + std::to_string(given_back) + " KiB (W " +
                                            std::to_string(w_kib) + " KiB)");
      setenv("MEMLANE_CPU_KEEP_WEIGHTS", "1", 1);
      const long kept = load_growth_kib(path, &notes);
      CHECK_MSG(kept > w_kib * 9 / 10, "MEMLANE_CPU_KEEP_WEIGHTS=1: the load grew " + std::to_string(kept) + " KiB (W " +
                                           std::to_string(w_kib) + " KiB)");
      unsetenv("MEMLANE_CPU_KEEP_WEIGHTS");
      unsetenv("MEMLANE_CONV_TUNE_FORCE");
      unsetenv("MEMLANE_CONV_TUNE");
      unlink(path.c_str());
    }
  }

  // The panel cache frees what no kernel holds (the tuner's losing candidates' packs).
  {
    memlane::cpu::simd::PanelCache cache;
    const std::vector<float> b1 = rng.vec(64 * 40), b2 = rng.vec(64 * 40);
    auto held = cache.get(b1.data(), 64, 40, false);
    cache.get(b2.data(), 64, 40, false);  // dropped at once by its only other holder
    CHECK(cache.size() == 2);
    cache.drop_unused();
    CHECK_MSG(cache.size() == 1, "packs left " + std::to_string(cache.size()));
    CHECK(cache.get(b1.data(), 64, 40, false) == held);  // the held one is the cache's still
  }
  return finish("conv_tune_test");
}
