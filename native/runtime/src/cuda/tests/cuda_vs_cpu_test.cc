// ctest cuda_vs_cpu: the CUDA backend against the CPU backend, for every op (test_plans.cc),
// a small residual CNN and the compiled fixture models (.mlplan under $MEMLANE_TEST_PLANS, or in
// the memlane-onnx-*/ folders that test/fixtures/onnx/make_plans.ts fills, found in
// $MEMLANE_TEST_CACHE or else $TMPDIR), under several technique settings, batch 1 and 3, each
// run three times (eager, graph capture, graph replay), plus async submit and two threads.
// Tolerances (max abs diff / max(1, max |cpu|)): fp32 1e-4; fp16 2e-2 (half storage of
// every activation and weight, fp32 accumulation).
//
// Host checks run first and need no GPU: switch parsing, every test plan accepted by the
// CUDA op validator, madvise release refused on anonymous memory and safe on a file
// mapping. Then without a GPU: prints why and exits 77 (ctest: skipped). `--host-only`
// (ctest cuda_host_checks) stops after the host checks and passes.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <map>
#include <set>
#include <thread>

#include "cuda_backend.h"
#include "forward.h"
#include "host_release.h"
#include "kernels.h"
#include "test_plans.h"

using namespace memlane;

namespace {

int failures = 0;
#define CHECK(cond, ...)                              \
  do {                                                \
    if (!(cond)) {                                    \
      ++failures;                                     \
      std::printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      std::printf(__VA_ARGS__);                       \
      std::printf("\n");                              \
    }                                                 \
  } while (0)

// The plans written by this test live in a directory of their own under $TMPDIR, removed
// on every return from main (the skip without a GPU included), so runs leave nothing behind.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/memlane-cuda-test-XXXXXX";
    if (const char* d = mkdtemp(t.data())) path = d;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

std::unique_ptr<PlanFile> write_and_read(const mltest::PlanBuilder& b, const std::string& path) {
  std::vector<uint8_t> bytes = b.build();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  std::unique_ptr<PlanFile> f;
  std::string msg;
  Status s = read_plan(path, &f, &msg);
  CHECK(s == Status::kOk, "read_plan %s: %s", path.c_str(), msg.c_str());
  return f;
}

std::vector<float> random_vec(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 7;
  for (auto& x : v) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    x = float((s >> 40) & 0xffffff) / float(1 << 23) - 1.f;
  }
  return v;
}

struct Io {
  std::vector<std::vector<float>> in, out;
  std::vector<const float*> inp;
  std::vector<float*> outp;
};
Io make_io(const Plan& p, int64_t batch, uint64_t seed) {
  Io io;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    io.in.push_back(random_vec(size_t(batch * p.tensors[p.inputs[i]].elements()), seed + i));
  for (int32_t id : p.outputs) io.out.emplace_back(size_t(batch * p.tensors[id].elements()), -7777.f);
  for (auto& v : io.in) io.inp.push_back(v.data());
  for (auto& v : io.out) io.outp.push_back(v.data());
  return io;
}

double rel_diff(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& ref) {
  double worst = 0;
  for (size_t o = 0; o < ref.size(); ++o) {
    double m = 1, d = 0;
    for (size_t i = 0; i < ref[o].size(); ++i) {
      m = std::max(m, double(std::fabs(ref[o][i])));
      double e = std::fabs(double(got[o][i]) - double(ref[o][i]));
      d = std::isnan(e) ? 1e30 : std::max(d, e);
    }
    worst = std::max(worst, d / m);
  }
  return worst;
}

void host_checks(const std::vector<cudatest::NamedPlan>& plans, const std::string& dir) {
  cuda::CudaOptions o;
  std::string msg;
  CHECK(cuda::parse_cuda_options({{"fp16", "true"}, {"contexts", "3"}, {"arena", "per-request"}}, &o, &msg) == Status::kOk,
        "parse: %s", msg.c_str());
  CHECK(o.fp16 && o.contexts == 3 && !o.arenaOnce && !o.cudaGraph, "per-request arena must turn graphs off");
  CHECK(cuda::parse_cuda_options({{"pinned", "maybe"}}, &o, &msg) == Status::kInvalidArgument &&
            msg.find("'pinned'") != std::string::npos && msg.find("maybe") != std::string::npos,
        "bad bool must name switch and value: %s", msg.c_str());
  CHECK(cuda::parse_cuda_options({{"contexts", "0"}}, &o, &msg) == Status::kInvalidArgument, "contexts 0 accepted");
  // Every test plan is one the CPU backend (the reference) accepts and the CUDA validator too;
  // checked here so that a malformed test plan shows without a GPU.
  for (const auto& np : plans) {
    auto f = write_and_read(np.plan, dir + "/validate.mlplan");
    if (!f) continue;
    Status s = cuda::validate_plan(f->plan(), &msg);
    CHECK(s == Status::kOk, "validate %s: %s", np.name.c_str(), msg.c_str());
    Status cs;
    auto cpu = make_cpu_backend(BackendOptions{}, &cs, &msg);
    CHECK(cpu && cpu->prepare(f->plan(), 3, &msg) == Status::kOk, "cpu prepare %s: %s", np.name.c_str(), msg.c_str());
  }
  // What the kernels would compute differently from the CPU backend (or write past a tensor's
  // end) must be refused at prepare, as the CPU backend refuses it.
  for (const auto& np : cudatest::rejected_plans()) {
    auto f = write_and_read(np.plan, dir + "/reject.mlplan");
    if (!f) continue;
    CHECK(cuda::validate_plan(f->plan(), &msg) == Status::kUnsupportedOp, "validator accepted %s", np.name.c_str());
    std::printf("  refused as expected: %s (%s)\n", np.name.c_str(), msg.c_str());
    Status cs;
    auto cpu = make_cpu_backend(BackendOptions{}, &cs, &msg);
    CHECK(cpu && cpu->prepare(f->plan(), 3, &msg) != Status::kOk, "cpu backend accepted %s", np.name.c_str());
  }
  {  // A 1x1 conv with only a bottom/right pad has OH x OW > H x W: it needs im2col (reading
     // x as the columns directly would run past each sample).
    cuda::ConvDesc d;
    d.N = 1; d.C = 4; d.H = 5; d.W = 5; d.M = 2; d.OH = 6; d.OW = 5; d.pb = 1;
    CHECK(cuda::conv_col_elems_per_sample(d) == 4 * 6 * 5, "1x1 conv with a bottom pad taken as pointwise");
    d.pb = 0; d.OH = 5;
    CHECK(cuda::conv_col_elems_per_sample(d) == 0, "plain 1x1 conv not taken as pointwise");
  }
  // madvise(DONTNEED) must refuse anonymous memory (it would zero it) ...
  std::vector<float> anon(1 << 16, 3.f);
  cuda::ReleaseResult r = cuda::release_host_pages(anon.data(), anon.size() * 4);
  CHECK(!r.released && anon[12345] == 3.f, "anonymous memory released: %s", r.reason.c_str());
  // ... and on a read-only file mapping drop the pages while the data reads back intact.
  auto f = write_and_read(cudatest::model_plan().plan, dir + "/release.mlplan");
  if (f) {
    const Plan& p = f->plan();
    std::vector<float> before(p.blob ? reinterpret_cast<const float*>(p.blob) : nullptr,
                              p.blob ? reinterpret_cast<const float*>(p.blob) + p.blobBytes / 4 : nullptr);
    r = cuda::release_host_pages(p.blob, p.blobBytes);
    CHECK(r.released, "file mapping not released: %s", r.reason.c_str());
    CHECK(std::equal(before.begin(), before.end(), reinterpret_cast<const float*>(p.blob)), "weights changed after release");
  }
  std::printf("host checks: %d failure(s)\n", failures);
}

// Compiled fixture models: $MEMLANE_TEST_PLANS, else every memlane-onnx-*/ that
// test/fixtures/onnx/make_plans.ts has filled (the vitest suites do so) in the suite's fixture
// cache $MEMLANE_TEST_CACHE (scripts/test.sh), or in $TMPDIR when that is unset.
std::vector<std::pair<std::string, std::unique_ptr<PlanFile>>> fixture_plans() {
  std::vector<std::pair<std::string, std::unique_ptr<PlanFile>>> files;
  std::string msg;
  std::vector<std::string> dirs;
  if (const char* extra = std::getenv("MEMLANE_TEST_PLANS")) {
    dirs.push_back(extra);
  } else {
    const char* cache = std::getenv("MEMLANE_TEST_CACHE");
    const char* t = std::getenv("TMPDIR");
    const std::string tmp = cache && *cache ? cache : t && *t ? t : "/tmp";
    if (DIR* d = opendir(tmp.c_str())) {
      while (dirent* e = readdir(d))
        if (std::string(e->d_name).rfind("memlane-onnx-", 0) == 0) dirs.push_back(tmp + "/" + e->d_name);
      closedir(d);
    }
  }
  for (const std::string& dirName : dirs) {
    DIR* d = opendir(dirName.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 7 && n.substr(n.size() - 7) == ".mlplan") {
        std::unique_ptr<PlanFile> f;
        if (read_plan(dirName + "/" + n, &f, &msg) == Status::kOk) files.emplace_back("plan " + n, std::move(f));
        else CHECK(false, "read_plan %s: %s", n.c_str(), msg.c_str());
      }
    }
    closedir(d);
  }
  return files;
}

struct Variant {
  const char* name;
  std::map<std::string, std::string> switches;
  double tol;
};

void compare(const std::string& name, const Plan& plan, const Variant& v, int64_t maxBatch) {
  Status st;
  std::string msg;
  BackendOptions bo;
  bo.switches = v.switches;
  auto cpu = make_cpu_backend(bo, &st, &msg);
  CHECK(cpu && cpu->prepare(plan, maxBatch, &msg) == Status::kOk, "cpu prepare %s: %s", name.c_str(), msg.c_str());
  auto be = make_cuda_backend(bo, &st, &msg);
  CHECK(be != nullptr, "cuda backend %s: %s", name.c_str(), msg.c_str());
  if (!cpu || !be) return;
  st = be->prepare(plan, maxBatch, &msg);
  CHECK(st == Status::kOk, "cuda prepare %s [%s]: %s", name.c_str(), v.name, msg.c_str());
  if (st != Status::kOk) return;
  for (int64_t batch : {int64_t(1), maxBatch}) {
    for (int rep = 0; rep < 3; ++rep) {  // eager, capture, replay
      Io ref = make_io(plan, batch, 100 + rep), got = make_io(plan, batch, 100 + rep);
      CHECK(cpu->run(batch, ref.inp.data(), ref.outp.data(), &msg) == Status::kOk, "cpu run: %s", msg.c_str());
      st = be->run(batch, got.inp.data(), got.outp.data(), &msg);
      CHECK(st == Status::kOk, "cuda run %s [%s] batch %lld: %s", name.c_str(), v.name, (long long)batch, msg.c_str());
      double d = rel_diff(got.out, ref.out);
      CHECK(d <= v.tol, "%s [%s] batch %lld rep %d: diff %.3g > %.3g", name.c_str(), v.name, (long long)batch, rep, d, v.tol);
      if (rep == 2) std::printf("  %-48s %-22s batch %lld diff %.2e\n", name.c_str(), v.name, (long long)batch, d);
    }
  }
  // Asynchronous submission: four requests in flight, outputs via host callbacks.
  auto* cb = dynamic_cast<cuda::CudaBackend*>(be.get());
  CHECK(cb != nullptr, "make_cuda_backend must return a CudaBackend");
  if (!cb) return;
  std::vector<Io> refs, gots;
  for (int k = 0; k < 4; ++k) {
    refs.push_back(make_io(plan, maxBatch, 200 + k));
    gots.push_back(make_io(plan, maxBatch, 200 + k));
  }
  std::atomic<int> done{0};
  for (int k = 0; k < 4; ++k) {
    cpu->run(maxBatch, refs[k].inp.data(), refs[k].outp.data(), &msg);
    st = cb->submit(maxBatch, gots[k].inp.data(), gots[k].outp.data(), [&](Status s, const std::string&) {
      if (s == Status::kOk) ++done;
    }, &msg);
    CHECK(st == Status::kOk, "submit %s: %s", name.c_str(), msg.c_str());
  }
  CHECK(cb->drain(&msg) == Status::kOk, "drain: %s", msg.c_str());
  CHECK(done == 4, "%s [%s]: %d of 4 callbacks ran", name.c_str(), v.name, done.load());
  for (int k = 0; k < 4; ++k)
    CHECK(rel_diff(gots[k].out, refs[k].out) <= v.tol, "%s [%s] submit %d differs", name.c_str(), v.name, k);
  // Two threads at once (one context each when contexts >= 2).
  Io t1 = make_io(plan, maxBatch, 300), t2 = make_io(plan, maxBatch, 301);
  Io r1 = make_io(plan, maxBatch, 300), r2 = make_io(plan, maxBatch, 301);
  cpu->run(maxBatch, r1.inp.data(), r1.outp.data(), &msg);
  cpu->run(maxBatch, r2.inp.data(), r2.outp.data(), &msg);
  std::string m1, m2;
  std::thread a([&] { be->run(maxBatch, t1.inp.data(), t1.outp.data(), &m1); });
  std::thread b([&] { be->run(maxBatch, t2.inp.data(), t2.outp.data(), &m2); });
  a.join();
  b.join();
  CHECK(rel_diff(t1.out, r1.out) <= v.tol && rel_diff(t2.out, r2.out) <= v.tol, "%s [%s] threads differ", name.c_str(), v.name);
  if (v.switches.empty()) std::printf("    notes: %s\n", cb->notes().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bool host_only = argc > 1 && std::string(argv[1]) == "--host-only";
  const ScratchDir scratch;
  if (scratch.path.empty()) {
    std::printf("FAIL: cannot create a scratch directory under $TMPDIR\n");
    return 1;
  }
  const std::string& dir = scratch.path;
  std::vector<cudatest::NamedPlan> plans = cudatest::op_plans();
  plans.push_back(cudatest::model_plan());
  host_checks(plans, dir);
  {  // every compiled fixture model must be accepted by the CUDA op validator
    std::string m;
    auto fixtures = fixture_plans();
    for (const auto& [name, f] : fixtures)
      CHECK(cuda::validate_plan(f->plan(), &m) == Status::kOk, "validate %s: %s", name.c_str(), m.c_str());
    std::printf("validated %zu compiled fixture plan(s)\n", fixtures.size());
  }
  if (host_only) return failures ? 1 : 0;

  Status st;
  std::string msg;
  BackendOptions probe;
  if (!make_cuda_backend(probe, &st, &msg)) {
    std::printf("SKIP cuda_vs_cpu: CUDA backend unavailable (%s: %s)\n", status_name(st), msg.c_str());
    return failures ? 1 : 77;
  }
  const std::vector<Variant> variants = {
      {"fp32 all techniques", {}, 1e-4},
      {"fp32 all off", {{"arena", "per-request"}, {"pinned", "false"}, {"overlap", "false"}, {"asyncOutputs", "false"}, {"cudaGraph", "false"}}, 1e-4},
      {"fp32 contexts=2", {{"contexts", "2"}}, 1e-4},
      {"fp16", {{"fp16", "true"}}, 2e-2},
  };
  std::vector<std::pair<std::string, std::unique_ptr<PlanFile>>> files = fixture_plans();
  std::set<std::string> fp32Only;
  for (size_t i = 0; i < plans.size(); ++i) {
    files.emplace_back(plans[i].name, write_and_read(plans[i].plan, dir + "/p" + std::to_string(i) + ".mlplan"));
    if (!plans[i].fp16) fp32Only.insert(plans[i].name);
  }
  for (const auto& [name, f] : files) {
    if (!f) continue;
    for (const Variant& v : variants)
      if (!(fp32Only.count(name) && v.switches.count("fp16"))) compare(name, f->plan(), v, 3);
  }
  std::printf("cuda_vs_cpu: %zu plans x %zu variants, %d failure(s)\n", files.size(), variants.size(), failures);
  return failures ? 1 : 0;
}
