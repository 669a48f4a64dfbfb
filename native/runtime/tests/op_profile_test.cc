// The CPU backend's per-op profile (Backend::set_profiling, cpu/op_profiler.h): off by default
// and after set_profiling(false) (runs add nothing), on it counts every run and every op with a
// kernel of its own, names the ops a Conv absorbed (Add+Relu), sums a batch's chunks, and the
// outputs stay those of the unprofiled path (profiling takes the serial path with 2 threads).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness.h"
#include "op_runner.h"
#include "cpu/cpu_features.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/op_profiler.h"

using namespace mltest;
using S = std::vector<int64_t>;

int main() {
  Rng rng;
  PlanBuilder pb;
  int x = pb.input("x", {16, 16, 16});
  int w = pb.weight("w", {16, 16, 3, 3}, rng.vec(16 * 16 * 9));
  int c = pb.act("c", {16, 16, 16});
  int s = pb.act("s", {16, 16, 16});
  int r = pb.act("r", {16, 16, 16});
  int g = pb.act("g", {16, 1, 1});
  int y = pb.output("y", {16});
  pb.op("Conv", {x, w, -1}, {c}, {{"kernel", S{3, 3}}, {"strides", S{1, 1}}, {"pads", S{1, 1, 1, 1}}, {"activation", std::string("none")}});
  pb.op("Add", {c, x}, {s});
  pb.op("Relu", {s}, {r});
  pb.op("GlobalAveragePool", {r}, {g});
  pb.op("Flatten", {g}, {y}, {{"axis", int64_t(1)}});

  std::vector<uint8_t> bytes = pb.build();
  memlane::Plan plan;
  std::string msg;
  memlane::Status st = memlane::parse_plan(bytes.data(), bytes.size(), &plan, &msg);
  CHECK_MSG(st == memlane::Status::kOk, msg);
  memlane::BackendOptions o;
  o.threads = 2;
  unsetenv("MEMLANE_PROFILE");
  auto be = memlane::make_cpu_backend(o, &st, &msg);
  const int64_t batch = 6;
  CHECK_MSG(be && be->prepare(plan, batch, &msg) == memlane::Status::kOk, msg);
  const std::vector<float> in = rng.vec(size_t(batch) * 16 * 16 * 16);
  std::vector<float> plain(batch * 16), profiled(batch * 16);
  const float* ins[] = {in.data()};
  float* outs[] = {plain.data()};
  CHECK(be->run(batch, ins, outs, &msg) == memlane::Status::kOk);
  CHECK(be->op_profile().runs == 0);  // off by default

  CHECK(be->set_profiling(true));
  outs[0] = profiled.data();
  for (int i = 0; i < 3; ++i) CHECK(be->run(batch, ins, outs, &msg) == memlane::Status::kOk);
  CHECK(be->set_profiling(false));
  CHECK(be->run(batch, ins, outs, &msg) == memlane::Status::kOk);  // off again: not counted
  CHECK_MSG(max_abs_diff(plain, profiled) <= 1e-6f, "profiled outputs differ from the timed path's");

  const memlane::OpProfile p = be->op_profile();
  CHECK_MSG(p.runs == 3, "runs " + std::to_string(p.runs));
  // The 3x3 conv absorbs the Add and Relu only on the paths with a residual epilogue (AVX-512's,
  // or the AVX2 Winograd kernel's: conv.cc); elsewhere the Add and the Relu are ops of their own.
  const bool fused = memlane::cpu::use_avx512f() || memlane::cpu::simd::have_avx2_gemm();
  const size_t want = fused ? 3 : 5;
  CHECK_MSG(p.ops.size() == want, "ops " + std::to_string(p.ops.size()) + ", expected " + std::to_string(want));
  if (p.ops.size() == want) {
    const size_t pool = want - 2;
    CHECK_MSG(p.ops[0].opType == "Conv" && p.ops[0].fused == (fused ? "Add+Relu" : ""), p.ops[0].opType + " fused " + p.ops[0].fused);
    CHECK_MSG(p.ops[0].name == "Conv_0", p.ops[0].name);
    // The conv's kernel names the path it took (conv.cc's ConvKernel::path): what a user reads
    // to know which algorithm ran, as trtexec's profile names its tactics.
    CHECK_MSG(!p.ops[0].kernel.empty() && p.ops[0].kernel.find(' ') == std::string::npos, "conv kernel \"" + p.ops[0].kernel + "\"");
    CHECK(p.ops[pool].opType == "GlobalAveragePool" && p.ops[pool].fused.empty());
    for (const auto& t : p.ops) {
      CHECK_MSG(t.calls >= 3 && t.calls % 3 == 0, t.name + " calls " + std::to_string(t.calls));  // a call per chunk per run
      CHECK_MSG(t.totalMs >= 0, t.name);
      CHECK_MSG(t.minMs >= 0 && t.minMs * double(t.calls) <= t.totalMs * 1.000001, t.name + " min call above the mean");
    }
    CHECK_MSG(p.ops[0].totalMs > p.ops[want - 1].totalMs, "the conv is slower than the flatten copy");
  }
  // A fresh profile on each set_profiling(true).
  CHECK(be->set_profiling(true));
  CHECK(be->op_profile().runs == 0);

  // MEMLANE_PROFILE=1's dump (OpProfiler::print) counts every profile since the first start:
  // 3 runs, a restart (a task's own profile), 2 runs: the dump says 5 runs' calls.
  {
    memlane::cpu::OpProfiler prof;
    const std::vector<const char*> all(plan.ops.size(), "im2col");
    auto runs = [&](int n) {
      for (int i = 0; i < n; ++i) {
        for (size_t op = 0; op < plan.ops.size(); ++op) prof.time(op, [] {});
        prof.end_run();
      }
    };
    prof.start(plan.ops.size());
    runs(3);
    prof.start(plan.ops.size());
    runs(2);
    CHECK(prof.result(plan, all).runs == 2 && prof.result(plan, all).ops[0].calls == 2);  // the task's own profile
    std::FILE* f = std::tmpfile();
    CHECK(f != nullptr);
    prof.print(plan, all, f);
    std::rewind(f);
    char line[512] = {0};
    CHECK(std::fgets(line, sizeof line, f) != nullptr);
    std::fclose(f);
    CHECK_MSG(std::string(line).find("calls 5") != std::string::npos, std::string("dump line: ") + line);
    CHECK_MSG(std::string(line).find("[im2col]") != std::string::npos, std::string("dump line names no kernel: ") + line);
  }
  return finish("op_profile_test");
}
