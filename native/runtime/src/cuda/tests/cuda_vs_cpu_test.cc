// ctest cuda_vs_cpu: the CUDA backend against the CPU backend, for every op (test_plans.cc),
// a small residual CNN and the compiled fixture models (.mlplan under $MEMLANE_TEST_PLANS, or in
// the memlane-onnx-*/ folders that test/fixtures/onnx/make_plans.ts fills, found in
// $MEMLANE_TEST_CACHE or else $TMPDIR), under several technique settings, batch 1 and 3, each
// run three times (eager, graph capture, graph replay), plus async submit and two threads.
// Tolerances for float outputs (max abs diff / max(1, max |cpu|)): fp32 1e-4; fp16 2e-2 (half
// storage of every activation and weight, fp32 accumulation). Integer and bool outputs must
// match exactly in every setting (test_io.h).
//
// The plan v2 plans (test_plans_data.cc) feed int64/int32 inputs values in their plan's range
// (test_io.h) and compare outputs of every dtype; an out-of-range Gather (int64), GatherElements
// (int64) or GatherND (int32 tuple) index must fail the request on both backends, under every
// setting and through run, synchronous and asynchronous submit, and drain (index_error_check).
//
// Host checks run first and need no GPU: switch parsing, every test plan accepted by the
// CUDA op validator and run by the CPU backend on the test's inputs (the refused ones refused), madvise release refused on anonymous memory and safe on a file
// mapping. Then without a GPU: prints why and exits 77 (ctest: skipped). `--host-only`
// (ctest cuda_host_checks) stops after the host checks and passes.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
#include "device_budget.h"
#include "forward.h"
#include "core/host_pages.h"
#include "kernels.h"
#include "test_io.h"
#include "test_plans.h"

using namespace memlane;
using cudatest::Io;
using cudatest::make_io;
using cudatest::rel_diff;

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
    // The reference runs on the inputs cuda_vs_cpu feeds (ids within their tables).
    Io io = make_io(f->plan(), 3, 5, np.intLo, np.intHi);
    CHECK(cpu && cpu->run(3, io.inp.data(), io.outp.data(), &msg) == Status::kOk, "cpu run %s: %s", np.name.c_str(), msg.c_str());
  }
  // What the kernels would compute differently from the CPU backend (or write past a tensor's
  // end) must be refused at prepare, as the CPU backend refuses it.
  std::vector<cudatest::NamedPlan> rejected = cudatest::rejected_plans();
  for (auto& np : cudatest::data_rejected_plans()) rejected.push_back(std::move(np));
  for (const auto& np : rejected) {
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
    // Narrow groups take the direct kernel and need no im2col scratch; wide ones keep the GEMM.
    d.C = 8; d.M = 8; d.group = 8; d.kh = d.kw = 3; d.ph = d.pw = d.pb = d.pr = 1;
    CHECK(cuda::conv_is_direct(d) && cuda::conv_col_elems_per_sample(d) == 0, "3x3 depthwise conv not direct");
    d.C = 80; d.group = 2;
    CHECK(!cuda::conv_is_direct(d) && cuda::conv_col_elems_per_sample(d) == 40 * 9 * 5 * 5,
          "3x3 conv in groups of 40 channels (360 taps) taken as direct");
    d.group = 1; d.C = 8;
    CHECK(!cuda::conv_is_direct(d), "an ungrouped conv taken as direct");
  }
  // madvise(DONTNEED) must refuse anonymous memory (it would zero it) ...
  std::vector<float> anon(1 << 16, 3.f);
  ReleaseResult r = release_host_pages(anon.data(), anon.size() * 4);
  CHECK(!r.released && anon[12345] == 3.f, "anonymous memory released: %s", r.reason.c_str());
  // ... and on a read-only file mapping drop the pages while the data reads back intact.
  auto f = write_and_read(cudatest::model_plan().plan, dir + "/release.mlplan");
  if (f) {
    const Plan& p = f->plan();
    std::vector<float> before(p.blob ? reinterpret_cast<const float*>(p.blob) : nullptr,
                              p.blob ? reinterpret_cast<const float*>(p.blob) + p.blobBytes / 4 : nullptr);
    r = release_host_pages(p.blob, p.blobBytes);
    CHECK(r.released, "file mapping not released: %s", r.reason.c_str());
    CHECK(std::equal(before.begin(), before.end(), reinterpret_cast<const float*>(p.blob)), "weights changed after release");
  }
  std::printf("host checks: %d failure(s)\n", failures);
}

// The device budget (device_budget.h: what prepare allocates, and what the memory estimate
// adds up) follows the switches: fp16 halves the arena and adds output slots and the upload
// staging; arena=per-request holds no arena; one slot without overlap or async outputs.
void budget_checks(const std::string& dir) {
  auto f = write_and_read(cudatest::model_plan().plan, dir + "/budget.mlplan");
  if (!f) return;
  const Plan& plan = f->plan();
  std::string msg;
  auto opts = [&](std::map<std::string, std::string> sw) {
    cuda::CudaOptions o;
    CHECK(cuda::parse_cuda_options(sw, &o, &msg) == Status::kOk, "parse: %s", msg.c_str());
    return o;
  };
  auto names = [](const std::vector<std::pair<std::string, uint64_t>>& v) {
    std::string s;
    for (const auto& a : v) s += a.first + " ";
    return s;
  };
  const cuda::CudaOptions def = opts({});
  const cuda::DeviceBudget b = cuda::device_budget(plan, 5, def);
  uint64_t in = 0, weights = 0;
  for (int32_t id : plan.inputs) in += (uint64_t(5 * plan.tensors[id].elements()) * 4 + 15) / 16 * 16;
  for (const TensorInfo& t : plan.tensors)
    if (t.is_weight()) weights += (uint64_t(t.elements()) * 4 + 255) / 256 * 256;
  CHECK(b.arenaBytes == (5 * plan.bytesPerSample + 255) / 256 * 256 && !b.halfArena, "arena %llu for 5 x %lld B",
        (unsigned long long)b.arenaBytes, (long long)plan.bytesPerSample);
  CHECK(b.weightBytes == weights && b.uploadStagingBytes == 0, "weights %llu, expected %llu", (unsigned long long)b.weightBytes,
        (unsigned long long)weights);
  const int64_t perSample = cuda::max_col_elems_per_sample(plan);
  CHECK(perSample > 0 && b.colElems == perSample * std::min<int64_t>(5, cuda::kColBudgetElems / perSample) && b.colBytes == uint64_t(b.colElems) * 4,
        "im2col %lld elements for %lld a sample", (long long)b.colElems, (long long)perSample);
  CHECK(b.inputStageBytes == in && b.deviceInputSlots == 2 && b.deviceOutputSlots == 0, "input slots %d of %llu B",
        b.deviceInputSlots, (unsigned long long)b.inputStageBytes);
  CHECK(names(b.context_allocations(def)) == "cublas-workspace arena im2col input-slot input-slot ", "allocations: %s",
        names(b.context_allocations(def)).c_str());
  const cuda::DeviceBudget h = cuda::device_budget(plan, 5, opts({{"fp16", "true"}}));
  CHECK(h.halfArena && h.arenaBytes == (5 * plan.bytesPerSample / 2 + 255) / 256 * 256 && h.deviceOutputSlots == 2 &&
            h.uploadStagingBytes > 0 && h.weightBytes < b.weightBytes && h.colBytes == uint64_t(h.colElems) * 2,
        "fp16 budget: arena %llu, output slots %d, staging %llu", (unsigned long long)h.arenaBytes, h.deviceOutputSlots,
        (unsigned long long)h.uploadStagingBytes);
  const cuda::CudaOptions per = opts({{"arena", "per-request"}, {"overlap", "false"}, {"asyncOutputs", "false"}});
  const cuda::DeviceBudget r = cuda::device_budget(plan, 5, per);
  CHECK(names(r.context_allocations(per)) == "cublas-workspace ", "per-request, no overlap: %s", names(r.context_allocations(per)).c_str());
  CHECK(cuda::context_slots(per) == 1 && r.deviceInputSlots == 0, "slots without overlap or async outputs");
}

// Compiled fixture models: $MEMLANE_TEST_PLANS, else every memlane-onnx-*/ that
// test/fixtures/onnx/make_plans.ts has filled (the vitest suites do so) in the suite's fixture
// cache $MEMLANE_TEST_CACHE (scripts/test.sh), or in $TMPDIR when that is unset.
std::vector<std::pair<std::string, std::unique_ptr<PlanFile>>> fixture_plans() {
  std::vector<std::pair<std::string, std::unique_ptr<PlanFile>>> files;
  std::string msg;
  std::vector<std::string> dirs;
  if (const char* extra = std::getenv("MEMLANE_TEST_PLANS")) {  // one folder or several, ':'-separated
    std::string list = extra;
    for (size_t at = 0; at <= list.size();) {
      const size_t end = std::min(list.find(':', at), list.size());
      if (end > at) dirs.push_back(list.substr(at, end - at));
      at = end + 1;
    }
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

// int64/int32 inputs get values in [lo, hi] (test_io.h).
void compare(const std::string& name, const Plan& plan, const Variant& v, int64_t maxBatch, int64_t lo, int64_t hi) {
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
      Io ref = make_io(plan, batch, 100 + rep, lo, hi), got = make_io(plan, batch, 100 + rep, lo, hi);
      CHECK(cpu->run(batch, ref.inp.data(), ref.outp.data(), &msg) == Status::kOk, "cpu run: %s", msg.c_str());
      st = be->run(batch, got.inp.data(), got.outp.data(), &msg);
      CHECK(st == Status::kOk, "cuda run %s [%s] batch %lld: %s", name.c_str(), v.name, (long long)batch, msg.c_str());
      double d = rel_diff(plan, batch, got, ref);
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
    refs.push_back(make_io(plan, maxBatch, 200 + k, lo, hi));
    gots.push_back(make_io(plan, maxBatch, 200 + k, lo, hi));
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
    CHECK(rel_diff(plan, maxBatch, gots[k], refs[k]) <= v.tol, "%s [%s] submit %d differs", name.c_str(), v.name, k);
  // Two threads at once (one context each when contexts >= 2).
  Io t1 = make_io(plan, maxBatch, 300, lo, hi), t2 = make_io(plan, maxBatch, 301, lo, hi);
  Io r1 = make_io(plan, maxBatch, 300, lo, hi), r2 = make_io(plan, maxBatch, 301, lo, hi);
  cpu->run(maxBatch, r1.inp.data(), r1.outp.data(), &msg);
  cpu->run(maxBatch, r2.inp.data(), r2.outp.data(), &msg);
  std::string m1, m2;
  std::thread a([&] { be->run(maxBatch, t1.inp.data(), t1.outp.data(), &m1); });
  std::thread b([&] { be->run(maxBatch, t2.inp.data(), t2.outp.data(), &m2); });
  a.join();
  b.join();
  CHECK(rel_diff(plan, maxBatch, t1, r1) <= v.tol && rel_diff(plan, maxBatch, t2, r2) <= v.tol, "%s [%s] threads differ", name.c_str(), v.name);
  if (v.switches.empty()) std::printf("    notes: %s\n", cb->notes().c_str());
}

// The settings every plan is compared under.
std::vector<Variant> variants() {
  return {
      {"fp32 all techniques", {}, 1e-4},
      {"fp32 all off", {{"arena", "per-request"}, {"pinned", "false"}, {"overlap", "false"}, {"asyncOutputs", "false"}, {"cudaGraph", "false"}}, 1e-4},
      {"fp32 contexts=2", {{"contexts", "2"}}, 1e-4},
      {"fp16", {{"fp16", "true"}}, 2e-2},
  };
}

// A plan whose first input holds indices, the values that are out of range at element
// `at` of one sample, and the op the error must name.
struct IndexCase {
  const char* name;
  const char* op;
  mltest::PlanBuilder plan;
  int64_t lo, hi;  // valid index values
  size_t at;
  std::vector<int64_t> bad;
};

std::vector<IndexCase> index_cases() {
  std::vector<IndexCase> v;
  {  // table [4, 3]: valid ids -4..3
    IndexCase c{"Gather int64", "Gather", {}, 0, 3, 1, {9, -5}};
    int w = c.plan.weight("emb", {4, 3}, std::vector<float>(12, 0.5f));
    int ids = c.plan.tensor("ids", {-1, 2}, "input", "int64");
    int y = c.plan.tensor("y", {-1, 2, 3}, "output");
    c.plan.op("Gather", {w, ids}, {y}, mltest::Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(c));
  }
  {  // rows of a weight [4, 3] per element: valid -4..3
    IndexCase c{"GatherElements int64", "GatherElements", {}, 0, 3, 1, {4, -5}};
    std::vector<float> w(12);
    for (size_t k = 0; k < w.size(); ++k) w[k] = 0.5f * float(k);
    int d = c.plan.weight("w", {4, 3}, w);
    int idx = c.plan.tensor("idx", {-1, 3}, "input", "int64");
    int y = c.plan.tensor("y", {-1, 3}, "output");
    c.plan.op("GatherElements", {d, idx}, {y}, mltest::Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(c));
  }
  {  // data [3, 5, 2], one (i0, i1) tuple a sample: i1 = 7 or -6 is out of range (dim 5)
    IndexCase c{"GatherND int32 tuple", "GatherND", {}, 0, 2, 1, {7, -6}};
    std::vector<float> w(30);
    for (size_t k = 0; k < w.size(); ++k) w[k] = 0.25f * float(k);
    int d = c.plan.weight("w", {3, 5, 2}, w);
    int idx = c.plan.tensor("idx", {-1, 2}, "input", "int32");
    int y = c.plan.tensor("y", {-1, 2}, "output");
    c.plan.op("GatherND", {d, idx}, {y});
    v.push_back(std::move(c));
  }
  return v;
}

void set_index(Io& io, const Plan& plan, size_t k, int64_t value) {
  if (plan.tensors[plan.inputs[0]].dtype == DType::kInt32) reinterpret_cast<int32_t*>(io.in[0].data())[k] = int32_t(value);
  else reinterpret_cast<int64_t*>(io.in[0].data())[k] = value;
}

// Host half of the index checks (no GPU): each case's plan is one the CUDA validator
// accepts, and its bad values are out of range for the CPU backend too.
void index_cases_host(const std::string& dir) {
  for (const IndexCase& c : index_cases()) {
    auto f = write_and_read(c.plan, dir + "/index.mlplan");
    if (!f) continue;
    Status st;
    std::string msg;
    CHECK(cuda::validate_plan(f->plan(), &msg) == Status::kOk, "validate %s: %s", c.name, msg.c_str());
    auto cpu = make_cpu_backend(BackendOptions{}, &st, &msg);
    CHECK(cpu && cpu->prepare(f->plan(), 2, &msg) == Status::kOk, "cpu prepare %s: %s", c.name, msg.c_str());
    if (!cpu) continue;
    Io good = make_io(f->plan(), 2, 1, c.lo, c.hi);
    CHECK(cpu->run(2, good.inp.data(), good.outp.data(), &msg) == Status::kOk, "cpu %s valid: %s", c.name, msg.c_str());
    for (int64_t bad : c.bad) {
      Io a = make_io(f->plan(), 1, 1, c.lo, c.hi);
      set_index(a, f->plan(), c.at, bad);
      CHECK(cpu->run(1, a.inp.data(), a.outp.data(), &msg) == Status::kInvalidArgument, "cpu %s accepted index %lld",
            c.name, (long long)bad);
    }
  }
}

// fp16 refuses integers carried through float32 and cast back (fp16_checks.cc), not an
// integer mask that stays float; fp32 takes both.
void fp16_integer_checks(const std::string& dir) {
  for (bool back : {true, false}) {
    mltest::PlanBuilder b;
    int ids = b.tensor("ids", {-1, 4}, "input", "int64");
    int f = b.tensor("f", {-1, 4}, "activation");
    b.op("Cast", {ids}, {f}, mltest::Attrs{{"to", std::string("float32")}});
    int k = b.weight("k", {1}, {3.f});
    int g = b.tensor("g", {-1, 4}, back ? "activation" : "output");
    b.op("Mul", {f, k}, {g});
    if (back) {
      int y = b.tensor("y", {-1, 4}, "output", "int64");
      b.op("Cast", {g}, {y}, mltest::Attrs{{"to", std::string("int64")}});
    }
    auto pf = write_and_read(b, dir + "/fp16int.mlplan");
    if (!pf) continue;
    std::string msg;
    CHECK(cuda::validate_plan(pf->plan(), &msg) == Status::kOk, "fp32 refused a Cast round trip: %s", msg.c_str());
    const Status st = cuda::check_fp16_integers(pf->plan(), &msg);
    if (back)
      CHECK(st == Status::kUnsupportedOp && msg.find("2048") != std::string::npos, "fp16 took int -> float32 -> int: %s (%s)",
            status_name(st), msg.c_str());
    else
      CHECK(st == Status::kOk, "fp16 refused an integer cast that stays float: %s", msg.c_str());
  }
}

// Requests completed through submit(): how many `done` calls, how many with a failure.
struct DoneCount {
  std::atomic<int> calls{0}, failed{0};
  DoneFn fn() {
    return [this](Status s, const std::string&) {
      if (s != Status::kOk) ++failed;
      ++calls;
    };
  }
  bool wait(int n) const {  // the driver's callback thread runs `done` after the request
    for (int i = 0; i < 1000 && calls < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return calls >= n;
  }
};

// An index out of range is the request's INVALID_ARGUMENT on both backends (never a read
// outside the table), and the next request with valid indices runs clean (the device error
// word is reset), under every setting: run(); a synchronous submit (asyncOutputs=0 or
// arena=per-request) returns the failure and does not call `done`; an asynchronous one
// calls `done` with it, and the failure is returned once more, by the next submit (which
// does not run) or by drain().
void index_error_check(const std::string& dir, const IndexCase& c, const Variant& v) {
  auto f = write_and_read(c.plan, dir + "/index.mlplan");
  if (!f) return;
  const Plan& plan = f->plan();
  const std::string tag = std::string(c.name) + " [" + v.name + "]";
  Status st;
  std::string msg;
  BackendOptions bo;
  bo.switches = v.switches;
  auto cpu = make_cpu_backend(bo, &st, &msg);
  auto be = make_cuda_backend(bo, &st, &msg);
  if (!cpu || !be || be->prepare(plan, 2, &msg) != Status::kOk || cpu->prepare(plan, 2, &msg) != Status::kOk) {
    CHECK(false, "index check setup %s: %s", tag.c_str(), msg.c_str());
    return;
  }
  auto names_op = [&](const std::string& m) { return m.find(std::string("op ") + c.op + " ") != std::string::npos; };
  auto clean_run = [&](const char* after) {
    Io ref = make_io(plan, 2, 2, c.lo, c.hi), got = make_io(plan, 2, 2, c.lo, c.hi);
    CHECK(cpu->run(2, ref.inp.data(), ref.outp.data(), &msg) == Status::kOk, "cpu run: %s", msg.c_str());
    st = be->run(2, got.inp.data(), got.outp.data(), &msg);
    CHECK(st == Status::kOk, "%s: cuda run after %s: %s", tag.c_str(), after, msg.c_str());
    CHECK(rel_diff(plan, 2, got, ref) == 0, "%s: cuda differs after %s", tag.c_str(), after);
  };
  for (int64_t bad : c.bad) {
    Io a = make_io(plan, 1, 1, c.lo, c.hi), b = make_io(plan, 1, 1, c.lo, c.hi);
    set_index(a, plan, c.at, bad);
    set_index(b, plan, c.at, bad);
    CHECK(cpu->run(1, a.inp.data(), a.outp.data(), &msg) == Status::kInvalidArgument, "%s: cpu accepted index %lld",
          tag.c_str(), (long long)bad);
    st = be->run(1, b.inp.data(), b.outp.data(), &msg);
    CHECK(st == Status::kInvalidArgument && names_op(msg), "%s: cuda index %lld: %s (%s)", tag.c_str(), (long long)bad,
          status_name(st), msg.c_str());
    clean_run("an index error");
  }
  const bool async = !(v.switches.count("asyncOutputs") && v.switches.at("asyncOutputs") == "false") &&
                     !(v.switches.count("arena") && v.switches.at("arena") == "per-request");
  Io e = make_io(plan, 1, 3, c.lo, c.hi), ok = make_io(plan, 1, 4, c.lo, c.hi);
  set_index(e, plan, c.at, c.bad[0]);
  DoneCount bad1;
  st = be->submit(1, e.inp.data(), e.outp.data(), bad1.fn(), &msg);
  if (!async) {
    CHECK(st == Status::kInvalidArgument && names_op(msg), "%s: sync submit of a bad index: %s (%s)", tag.c_str(),
          status_name(st), msg.c_str());
    CHECK(bad1.calls == 0, "%s: a failed sync submit also called done (%d)", tag.c_str(), bad1.calls.load());
  } else {
    CHECK(st == Status::kOk, "%s: async submit: %s (%s)", tag.c_str(), status_name(st), msg.c_str());
    CHECK(bad1.wait(1) && bad1.failed == 1, "%s: done saw %d failure(s) of %d call(s)", tag.c_str(), bad1.failed.load(),
          bad1.calls.load());
    DoneCount next;  // the failure comes back from the next submit, which does not run
    st = be->submit(1, ok.inp.data(), ok.outp.data(), next.fn(), &msg);
    CHECK(st == Status::kInvalidArgument && names_op(msg), "%s: next submit after a failed async request: %s (%s)",
          tag.c_str(), status_name(st), msg.c_str());
    CHECK(be->drain(&msg) == Status::kOk && next.calls == 0, "%s: the refused submit ran (%d) or drain failed: %s",
          tag.c_str(), next.calls.load(), msg.c_str());
    DoneCount bad2;  // or from drain, once
    st = be->submit(1, e.inp.data(), e.outp.data(), bad2.fn(), &msg);
    CHECK(st == Status::kOk, "%s: async submit: %s", tag.c_str(), msg.c_str());
    st = be->drain(&msg);
    CHECK(st == Status::kInvalidArgument && names_op(msg), "%s: drain after a failed async request: %s (%s)", tag.c_str(),
          status_name(st), msg.c_str());
    CHECK(be->drain(&msg) == Status::kOk, "%s: a second drain repeated the failure: %s", tag.c_str(), msg.c_str());
  }
  DoneCount good;  // and then a valid request through submit completes normally
  st = be->submit(1, ok.inp.data(), ok.outp.data(), good.fn(), &msg);
  CHECK(st == Status::kOk && be->drain(&msg) == Status::kOk && good.wait(1) && good.failed == 0,
        "%s: valid submit after the failures: %s (%d done)", tag.c_str(), msg.c_str(), good.calls.load());
  clean_run("a failed submit");
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
  for (auto& np : cudatest::data_op_plans()) plans.push_back(std::move(np));
  host_checks(plans, dir);
  {  // every compiled fixture model must be accepted by the CUDA op validator
    std::string m;
    auto fixtures = fixture_plans();
    for (const auto& [name, f] : fixtures) {
      CHECK(cuda::validate_plan(f->plan(), &m) == Status::kOk, "validate %s: %s", name.c_str(), m.c_str());
      if (cuda::check_fp16_integers(f->plan(), &m) != Status::kOk)  // a fact to know, not a failure
        std::printf("  fp16 refuses %s: %s\n", name.c_str(), m.c_str());
    }
    std::printf("validated %zu compiled fixture plan(s)\n", fixtures.size());
  }
  index_cases_host(dir);
  fp16_integer_checks(dir);
  budget_checks(dir);
  if (host_only) return failures ? 1 : 0;

  Status st;
  std::string msg;
  BackendOptions probe;
  if (!make_cuda_backend(probe, &st, &msg)) {
    std::printf("SKIP cuda_vs_cpu: CUDA backend unavailable (%s: %s)\n", status_name(st), msg.c_str());
    return failures ? 1 : 77;
  }
  const std::vector<Variant> settings = variants();
  std::vector<std::pair<std::string, std::unique_ptr<PlanFile>>> files = fixture_plans();
  std::set<std::string> fp32Only;
  std::map<std::string, std::pair<int64_t, int64_t>> intRange;  // fixture models: ids, masks in [0, 1]
  for (size_t i = 0; i < plans.size(); ++i) {
    files.emplace_back(plans[i].name, write_and_read(plans[i].plan, dir + "/p" + std::to_string(i) + ".mlplan"));
    if (!plans[i].fp16) fp32Only.insert(plans[i].name);
    intRange[plans[i].name] = {plans[i].intLo, plans[i].intHi};
  }
  for (const auto& [name, f] : files) {
    if (!f) continue;
    const auto range = intRange.count(name) ? intRange[name] : std::pair<int64_t, int64_t>(0, 1);
    for (const Variant& v : settings)
      if (!(fp32Only.count(name) && v.switches.count("fp16"))) compare(name, f->plan(), v, 3, range.first, range.second);
  }
  // The index checks also run with only the switches that change how a request completes.
  std::vector<Variant> indexSettings = settings;
  indexSettings.push_back({"asyncOutputs=0", {{"asyncOutputs", "false"}}, 0});
  indexSettings.push_back({"arena=per-request", {{"arena", "per-request"}}, 0});
  const int before = failures;
  for (const IndexCase& c : index_cases())
    for (const Variant& v : indexSettings) index_error_check(dir, c, v);
  std::printf("  index out of range (Gather int64, GatherElements int64, GatherND int32) x %zu settings: %d failure(s)\n",
              indexSettings.size(), failures - before);
  std::printf("cuda_vs_cpu: %zu plans x %zu variants, %d failure(s)\n", files.size(), settings.size(), failures);
  return failures ? 1 : 0;
}
