// The arena is allocated once in prepare (min(maxBatch, chunk) x bytesPerSample) and run()
// allocates nothing: global operator new is counted around repeated runs of a small CNN-like
// plan. A batch run in chunks of a few samples gives the same outputs as in one pass, and
// submit() (synchronous on the CPU) gives those of run().
#include <atomic>
#include <cstdlib>
#include <new>

#include "harness.h"
#include "op_runner.h"

static std::atomic<long> g_news{0};
void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

using namespace mltest;
using namespace memlane;

int main() {
  Rng rng;
  PlanBuilder pb;
  int x = pb.input("x", {1, 8, 8});
  int w1 = pb.weight("w1", {8, 1, 3, 3}, rng.vec(72));
  int b1 = pb.weight("b1", {8}, rng.vec(8));
  int c1 = pb.act("c1", {8, 8, 8});
  int p1 = pb.act("p1", {8, 4, 4});
  int s1 = pb.weight("s1", {8, 1, 1}, rng.vec(8));
  int m1 = pb.act("m1", {8, 4, 4});
  int f1 = pb.act("f1", {128});
  int w2 = pb.weight("w2", {10, 128}, rng.vec(1280));
  int g1 = pb.act("g1", {10});
  int y = pb.output("y", {10});
  using S = std::vector<int64_t>;
  pb.op("Conv", {x, w1, b1}, {c1}, {{"kernel", S{3, 3}}, {"pads", S{1, 1, 1, 1}}, {"activation", std::string("relu")}});
  pb.op("MaxPool", {c1}, {p1}, {{"kernel", S{2, 2}}, {"strides", S{2, 2}}});
  pb.op("Mul", {p1, s1}, {m1});
  pb.op("Flatten", {m1}, {f1}, {{"axis", int64_t(1)}});
  pb.op("Gemm", {f1, w2}, {g1}, {{"transB", int64_t(1)}});
  pb.op("Softmax", {g1}, {y}, {{"axis", int64_t(1)}});
  std::vector<uint8_t> bytes = pb.build();
  Plan plan;
  std::string msg;
  CHECK_MSG(parse_plan(bytes.data(), bytes.size(), &plan, &msg) == Status::kOk, msg);
  for (int threads : {1, 2}) {
    BackendOptions o;
    o.threads = threads;
    Status st;
    auto be = make_cpu_backend(o, &st, &msg);
    const int64_t maxBatch = 16;
    CHECK_MSG(be->prepare(plan, maxBatch, &msg) == Status::kOk, msg);
    CHECK(be->memory_stats().arenaBytes == uint64_t(maxBatch) * plan.bytesPerSample);
    CHECK(be->memory_stats().weightBytesHost == 0);  // weights stay in the mapping
    CHECK(be->memory_stats().weightBytesMapped == plan.weightBytes);
    std::vector<float> in(maxBatch * 64), out(maxBatch * 10);
    for (auto& v : in) v = rng.next();
    const float* ip = in.data();
    float* op = out.data();
    CHECK(be->run(1, &ip, &op, &msg) == Status::kOk);  // first run may let BLAS set up
    const long before = g_news.load();
    for (int64_t b : {1, 7, 16, 3, 16})
      for (int i = 0; i < 5; ++i) CHECK(be->run(b, &ip, &op, &msg) == Status::kOk);
    const long after = g_news.load();
    CHECK_MSG(after == before, std::to_string(after - before) + " operator new calls during run()");
    float sum = 0;
    for (int k = 0; k < 10; ++k) sum += out[k];
    CHECK(std::fabs(sum - 1.f) < 1e-5f);
    // batch outside 1..maxBatch is an argument error, not a crash
    CHECK(be->run(17, &ip, &op, &msg) == Status::kInvalidArgument);
    CHECK(be->run(0, &ip, &op, &msg) == Status::kInvalidArgument);
  }
  // Two lanes (threads 2) give the outputs of one, for every batch size.
  {
    std::vector<float> in(16 * 64);
    for (auto& v : in) v = rng.next();
    const float* ip = in.data();
    std::vector<float> outs[2] = {std::vector<float>(16 * 10), std::vector<float>(16 * 10)};
    for (int64_t b : {1, 2, 3, 7, 16}) {
      for (int t = 0; t < 2; ++t) {
        BackendOptions o;
        o.threads = t + 1;
        Status st;
        auto be = make_cpu_backend(o, &st, &msg);
        CHECK_MSG(be->prepare(plan, 16, &msg) == Status::kOk, msg);
        float* op = outs[t].data();
        CHECK(be->run(b, &ip, &op, &msg) == Status::kOk);
      }
      for (int64_t i = 0; i < b * 10; ++i) CHECK(std::fabs(outs[0][size_t(i)] - outs[1][size_t(i)]) < 1e-6f);
    }
  }
  // Chunks: MEMLANE_CHUNK_BYTES of 3 samples' arena runs batch 16 as 3+3+3+3+3+1.
  {
    std::vector<float> in(16 * 64), whole(16 * 10), chunked(16 * 10);
    for (auto& v : in) v = rng.next();
    const float* ip = in.data();
    for (int pass = 0; pass < 2; ++pass) {
      if (pass) setenv("MEMLANE_CHUNK_BYTES", std::to_string(3 * plan.bytesPerSample).c_str(), 1);
      BackendOptions o;
      o.threads = 1;
      Status st;
      auto be = make_cpu_backend(o, &st, &msg);
      CHECK_MSG(be->prepare(plan, 16, &msg) == Status::kOk, msg);
      CHECK(be->memory_stats().arenaBytes == uint64_t(pass ? 3 : 16) * plan.bytesPerSample);
      float* op = pass ? chunked.data() : whole.data();
      CHECK(be->run(16, &ip, &op, &msg) == Status::kOk);
    }
    unsetenv("MEMLANE_CHUNK_BYTES");
    for (size_t i = 0; i < whole.size(); ++i) CHECK(std::fabs(whole[i] - chunked[i]) < 1e-6f);
  }
  // Backend::submit's synchronous default (the CPU backend): the outputs of run(), `done`
  // called once before submit returns, never for a refused request; one request in flight.
  {
    BackendOptions o;
    o.threads = 1;
    o.tuneConvs = false;  // (its note aside, the notes of a plan with nothing repacked are empty)
    Status st;
    auto be = make_cpu_backend(o, &st, &msg);
    CHECK_MSG(be->prepare(plan, 16, &msg) == Status::kOk, msg);
    CHECK(be->max_in_flight() == 1);
    CHECK_MSG(be->notes().empty(), be->notes());
    std::vector<float> in(16 * 64), viaRun(16 * 10), viaSubmit(16 * 10, -1.f);
    for (auto& v : in) v = rng.next();
    const float* ip = in.data();
    float* op = viaRun.data();
    CHECK(be->run(5, &ip, &op, &msg) == Status::kOk);
    op = viaSubmit.data();
    int done = 0;
    CHECK(be->submit(5, &ip, &op, [&](Status s, const std::string&) { done += s == Status::kOk; }, &msg) == Status::kOk);
    CHECK(done == 1);
    CHECK(be->drain(&msg) == Status::kOk);
    for (size_t i = 0; i < 5 * 10; ++i) CHECK(viaRun[i] == viaSubmit[i]);
    CHECK(be->submit(17, &ip, &op, [&](Status, const std::string&) { ++done; }, &msg) == Status::kInvalidArgument);
    CHECK(done == 1);
  }
  // An arena larger than the machine is refused at prepare, not faulted in at run time.
  {
    BackendOptions o;
    Status st;
    auto be = make_cpu_backend(o, &st, &msg);
    CHECK(be->prepare(plan, int64_t(1) << 40, &msg) == Status::kOutOfMemory);
    CHECK_CONTAINS(msg, "exceeds physical memory");
  }
  return finish("arena_test");
}
