// Plan v3 shape profiles (docs/plan-format.md, "Profiles"): the reader parses every profile
// with weights shared in the one blob, refuses a corrupt profile table naming the field and its
// byte offset, and the Runtime picks the profile a request's shapes match, refusing others
// with the list of profiles; its profiles share one host arena (the largest, not the sum).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "backend.h"
#include "harness.h"
#include "memlane/runtime.h"
#include "plan/plan.h"
#include "plan_builder.h"

using namespace memlane;

static const std::vector<int64_t> kSeqs = {2, 3, 5};
static const std::vector<float> kW = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [4, 3]

// x [N, S, 4] -> MatMul w [4, 3] -> Relu -> y [N, S, 3]; the same weight() calls in every
// profile, so the profiles share the blob.
static mltest::PlanBuilder profile(int64_t seq, const std::string& input = "x") {
  mltest::PlanBuilder b;
  int x = b.tensor(input, {-1, seq, 4}, "input");
  int w = b.weight("w", {4, 3}, kW);
  int m = b.tensor("m", {-1, seq, 3}, "activation");
  int y = b.tensor("y", {-1, seq, 3}, "output");
  b.op("MatMul", {x, w}, {m});
  b.op("Relu", {m}, {y});
  return b;
}

static std::vector<uint8_t> three_profiles() {
  auto a = profile(2), b = profile(3), c = profile(5);
  return mltest::PlanBuilder::build_profiles({&a, &b, &c});
}

static void expect_fail(const std::vector<uint8_t>& f, const std::string& want, const char* label) {
  std::vector<Plan> ps;
  std::string msg;
  const Status s = parse_plan_profiles(f.data(), f.size(), &ps, &msg);
  CHECK_MSG(s == Status::kPlanInvalid, std::string(label) + ": got " + status_name(s) + " " + msg);
  CHECK_CONTAINS(msg, want);
}

static std::vector<float> reference(const std::vector<float>& x, int64_t rows) {
  std::vector<float> y(size_t(rows * 3));
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < 3; ++j) {
      float acc = 0;
      for (int k = 0; k < 4; ++k) acc += x[size_t(r * 4 + k)] * kW[size_t(k * 3 + j)];
      y[size_t(r * 3 + j)] = acc > 0 ? acc : 0;
    }
  return y;
}

// The plan bytes in a fresh temp file (the caller unlinks it).
static std::string write_temp_plan(const std::vector<uint8_t>& bytes) {
  char path[] = "/tmp/memlane-profiles-XXXXXX";
  const int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
  close(fd);
  return path;
}

// A CPU Runtime with one thread.
static std::unique_ptr<Runtime> cpu_runtime() {
  RuntimeOptions o;
  o.device = "cpu";
  o.threads = 1;
  RtError err;
  auto rt = Runtime::create(o, &err);
  CHECK_MSG(rt != nullptr, err.message);
  return rt;
}

int main() {
  namespace pf = plan_format;
  const std::vector<uint8_t> good = three_profiles();
  // Parsed: three profiles, one weight in the blob that all of them point at.
  {
    std::vector<Plan> ps;
    std::string msg;
    CHECK_MSG(parse_plan_profiles(good.data(), good.size(), &ps, &msg) == Status::kOk, msg);
    CHECK(ps.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(ps[i].tensors[size_t(ps[i].inputs[0])].shape == (std::vector<int64_t>{-1, kSeqs[i], 4}));
      CHECK(ps[i].tensors[1].data == ps[0].tensors[1].data);  // the same bytes of the mapping
    }
    CHECK(ps[0].tensors[1].data[5] == 6.f);
    CHECK(distinct_weight_bytes(ps) == 48);  // once, not 3 x 48
    Plan p0;
    CHECK(parse_plan(good.data(), good.size(), &p0, &msg) == Status::kOk && p0.tensors[0].shape[1] == 2);
  }
  // Corrupt table: each message names the field and its byte offset in the file.
  {
    auto f = good;
    f[64] = 0;
    mltest::PlanBuilder::rehash(f);
    expect_fail(f, "profiles.count (profile table, byte 64): expected 1..64, found 0", "count 0");
    f[64] = 200;
    mltest::PlanBuilder::rehash(f);
    expect_fail(f, "profiles.count (profile table, byte 64): expected 1..64, found 200", "count 200");
    f = good;
    f[68] = 1;
    mltest::PlanBuilder::rehash(f);
    expect_fail(f, "profiles.reserved (profile table, byte 68): expected 0, found 1", "reserved");
    f = good;
    mltest::PlanBuilder::put64(f, 88, mltest::PlanBuilder::rd(f, 72));  // entry 1 -> entry 0's header
    mltest::PlanBuilder::rehash(f);
    expect_fail(f, "profiles[1].offset (profile table, byte 88)", "overlapping offset");
    expect_fail(f, "after the table and the previous profile, inside the header", "overlapping offset");
    f = good;
    mltest::PlanBuilder::put64(f, 112, mltest::PlanBuilder::rd(f, 112) + 1);  // entry 2's length past the header
    mltest::PlanBuilder::rehash(f);
    expect_fail(f, "profiles[2].length (profile table, byte 112)", "long length");
    f = good;
    mltest::PlanBuilder::put64(f, 112, 0);
    mltest::PlanBuilder::rehash(f);
    expect_fail(f, "profiles[2].length (profile table, byte 112): expected 1..", "zero length");
    // Not rehashed: the header hash catches the flipped byte first.
    f = good;
    f[64] = 2;
    expect_fail(f, "header hash", "hash");
  }
  // A bad profile is named; profiles must agree on their inputs and differ in their shapes.
  {
    auto a = profile(2), b = profile(3), c = profile(5);
    b.ops.clear();
    expect_fail(mltest::PlanBuilder::build_profiles({&a, &b, &c}), "profiles[1].ops: expected at least one op", "no ops");
    auto d = profile(3, "ids");
    expect_fail(mltest::PlanBuilder::build_profiles({&a, &d}), "profiles[1].inputs[0]: expected x float32 rank 3 batch axis 0 (as profiles[0])", "renamed input");
    auto e = profile(2);
    expect_fail(mltest::PlanBuilder::build_profiles({&a, &c, &e}), "profiles[2].inputs: expected shapes no other profile has, found those of profiles[0]", "same shapes");
  }
  // The Runtime: every profile runs through its own backend, on one shared arena; other shapes
  // are refused with the list of profiles.
  {
    const std::string path = write_temp_plan(good);
    auto rt = cpu_runtime();
    RtError err;
    CHECK_MSG(rt->load(path, 4, &err), err.message);
    unlink(path.c_str());
    CHECK(rt->profile_count() == 3);
    CHECK(rt->profile_text(1) == "#1 x [N,3,4]");
    for (size_t i = 0; i < 3; ++i) {
      const int64_t n = 2, S = kSeqs[i];
      std::vector<float> x(size_t(n * S * 4));
      for (size_t k = 0; k < x.size(); ++k) x[k] = float(int(k % 7) - 3) * 0.5f;
      std::vector<float> y(size_t(n * S * 3), -1.f);
      const float* in[] = {x.data()};
      float* out[] = {y.data()};
      CHECK_MSG(rt->run({{n, S, 4}}, in, out, &err), err.message);
      CHECK(rt->active_profile() == i);
      CHECK(rt->outputs()[0].shape == (std::vector<int64_t>{-1, S, 3}));
      const std::vector<float> want = reference(x, n * S);
      for (size_t k = 0; k < y.size(); ++k) CHECK_MSG(std::fabs(y[k] - want[k]) < 1e-5f, "profile " + std::to_string(i));
    }
    // One arena for the three: the largest profile's (maxBatch 4 x its bytesPerSample at most).
    const RuntimeMemory m = rt->memory();
    CHECK(m.weightsBytes == 48);
    // bytesPerSample 192, 192 and 256 (x, m, y in 64-byte slots): 4 x 256, where three arenas would be 4 x 640.
    CHECK_MSG(m.arenaBytes == 4 * 256, "arena " + std::to_string(m.arenaBytes));
    std::vector<float> x(2 * 4 * 4);
    std::vector<float> y(2 * 4 * 3);
    const float* in[] = {x.data()};
    float* out[] = {y.data()};
    CHECK(!rt->run({{2, 4, 4}}, in, out, &err));
    CHECK(err.code == int(protocol::ErrorCode::kShapeMismatch));
    CHECK_CONTAINS(err.message, "inputs x [2,4,4] match none of the plan's 3 shape profiles (#0 x [N,2,4]; #1 x [N,3,4]; #2 x [N,5,4]");
    CHECK(rt->active_profile() == 2);  // a refused request leaves the last profile active
  }
  // A profile the reader accepts and the CPU backend refuses (a rank-3 Conv) fails load() naming
  // the profile, and leaves the Runtime able to load a good plan afterwards (the first profile's
  // backend had been prepared for the plan that went away with the failed load).
  {
    auto a = profile(2), b = profile(3);
    b.ops[0].op = "Conv";
    b.ops[0].attrs = {{"kernel", std::vector<int64_t>{1, 1}}};
    const std::vector<uint8_t> refused = mltest::PlanBuilder::build_profiles({&a, &b});
    std::vector<Plan> ps;
    std::string msg;
    CHECK_MSG(parse_plan_profiles(refused.data(), refused.size(), &ps, &msg) == Status::kOk, msg);
    const std::string bad = write_temp_plan(refused), ok = write_temp_plan(good);
    auto rt = cpu_runtime();
    RtError err;
    CHECK(!rt->load(bad, 4, &err));
    CHECK_CONTAINS(err.message, "profile 1: ");
    CHECK_CONTAINS(err.message, "Conv");
    CHECK(rt->profile_count() == 0);
    CHECK_MSG(rt->load(ok, 4, &err), err.message);
    unlink(bad.c_str());
    unlink(ok.c_str());
    CHECK(rt->profile_count() == 3);
    std::vector<float> x(2 * 5 * 4, 1.f), y(2 * 5 * 3, -1.f);
    const float* in[] = {x.data()};
    float* out[] = {y.data()};
    CHECK_MSG(rt->run({{2, 5, 4}}, in, out, &err), err.message);
    const std::vector<float> want = reference(x, 10);
    for (size_t k = 0; k < y.size(); ++k) CHECK(std::fabs(y[k] - want[k]) < 1e-5f);
  }
  // The CPU backends' packed dense-layer weights (gemm_panels.h) are packed once for the three
  // profiles: an 8 MiB MatMul weight adds about 8 MiB of resident memory at load, not 24.
  {
    const int64_t K = 1024, N = 2048;
    std::vector<mltest::PlanBuilder> ps;
    for (int64_t seq : kSeqs) {
      mltest::PlanBuilder b;
      int x = b.tensor("x", {-1, seq, K}, "input");
      int w = b.weight("w", {K, N}, std::vector<float>(size_t(K * N), 0.25f));
      int y = b.tensor("y", {-1, seq, N}, "output");
      b.op("MatMul", {x, w}, {y});
      ps.push_back(std::move(b));
    }
    const std::string path = write_temp_plan(mltest::PlanBuilder::build_profiles({&ps[0], &ps[1], &ps[2]}));
    auto rss_kib = [] {
      std::ifstream f("/proc/self/status");
      std::string line;
      while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
      return -1L;
    };
    auto rt = cpu_runtime();
    RtError err;
    const long before = rss_kib();
    CHECK_MSG(rt->load(path, 2, &err), err.message);
    const double grew_mib = double(rss_kib() - before) / 1024;
    unlink(path.c_str());
    CHECK_MSG(grew_mib < 14, "load grew RSS by " + std::to_string(grew_mib) + " MiB for an 8 MiB weight and 3 profiles");
    std::vector<float> x(size_t(2 * 5 * K), 1.f), y(size_t(2 * 5 * N), -1.f);
    const float* in[] = {x.data()};
    float* out[] = {y.data()};
    CHECK_MSG(rt->run({{2, 5, K}}, in, out, &err), err.message);
    for (float v : y) CHECK(std::fabs(v - 0.25f * float(K)) < 1e-2f);
  }
  return mltest::finish("plan_profiles_test");
}
