// The batch tail (cpu/batch_tail.h): a plan whose conv runs in chunks of samples and whose
// classifier runs once over the whole batch gives the outputs it gives with every op in the
// chunks (MEMLANE_BATCH_TAIL=0), at any batch up to maxBatch, on 1 and 2 threads, with a graph
// output written before the tail and a graph input read only by it; the tail's own arena keeps
// tensors alive at once apart.
#include <cstdlib>
#include <string>

#include "cpu/batch_tail.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using namespace memlane;
using V = std::vector<float>;
using S = std::vector<int64_t>;

namespace {

Attrs gemm_attrs() {
  return {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t(0)}, {"transB", int64_t(1)}, {"activation", std::string("none")}};
}

// x [16,32,32] (64 KiB a sample: at maxBatch 8 a chunk is 4 samples) -conv3x3-> relu -> GAP ->
// pooled (a graph output, written in the chunks) -> flatten -> Gemm 16->512 -> Relu ->
// Gemm 512->256 (512 KiB of weights) -> + m (a graph input only the tail reads) -> logits.
PlanBuilder classifier_plan() {
  PlanBuilder b;
  Rng r;
  const int x = b.input("x", {16, 32, 32});
  const int m = b.input("m", {256});
  const int cw = b.weight("cw", {16, 16, 3, 3}, r.vec(16 * 16 * 9));
  const int cb = b.weight("cb", {16}, r.vec(16));
  const int y = b.act("y", {16, 32, 32});
  const int yr = b.act("yr", {16, 32, 32});
  const int pooled = b.output("pooled", {16, 1, 1});
  const int f = b.act("f", {16});
  const int w1 = b.weight("w1", {512, 16}, r.vec(512 * 16));
  const int b1 = b.weight("b1", {512}, r.vec(512));
  const int h = b.act("h", {512});
  const int hr = b.act("hr", {512});
  const int w2 = b.weight("w2", {256, 512}, r.vec(256 * 512));
  const int g = b.act("g", {256});
  const int logits = b.output("logits", {256});
  b.op("Conv", {x, cw, cb}, {y},
       {{"kernel", S{3, 3}}, {"strides", S{1, 1}}, {"pads", S{1, 1, 1, 1}}, {"activation", std::string("none")}});
  b.op("Relu", {y}, {yr});
  b.op("GlobalAveragePool", {yr}, {pooled});
  b.op("Flatten", {pooled}, {f}, {{"axis", int64_t(1)}});
  b.op("Gemm", {f, w1, b1}, {h}, gemm_attrs());
  b.op("Relu", {h}, {hr});
  b.op("Gemm", {hr, w2}, {g}, gemm_attrs());
  b.op("Add", {g, m}, {logits});
  return b;
}

// x [512, 4, 4] -> 1x1 conv 512 -> 512 (1 MiB of weights, 64 KiB of activations a sample)
// -> Relu -> GlobalAveragePool -> Flatten -> Gemm 512 -> 10.
PlanBuilder late_conv_plan() {
  PlanBuilder b;
  Rng r;
  const int x = b.input("x", {512, 4, 4});
  const int cw = b.weight("cw", {512, 512, 1, 1}, r.vec(512 * 512));
  const int y = b.act("y", {512, 4, 4});
  const int yr = b.act("yr", {512, 4, 4});
  const int p = b.act("p", {512, 1, 1});
  const int f = b.act("f", {512});
  const int w = b.weight("w", {10, 512}, r.vec(10 * 512));
  const int logits = b.output("logits", {10});
  b.op("Conv", {x, cw, -1}, {y},
       {{"kernel", S{1, 1}}, {"strides", S{1, 1}}, {"pads", S{0, 0, 0, 0}}, {"activation", std::string("none")}});
  b.op("Relu", {y}, {yr});
  b.op("GlobalAveragePool", {yr}, {p});
  b.op("Flatten", {p}, {f}, {{"axis", int64_t(1)}});
  b.op("Gemm", {f, w}, {logits}, gemm_attrs());
  return b;
}

struct Outcome {
  RunResult r;
  uint64_t tailBytesPerSample = 0;  // reported whenever the plan has a tail
  bool tailRun = false;             // the backend's notes say it runs one
};

Outcome run(const PlanBuilder& b, int64_t maxBatch, int64_t batch, int threads, const char* tail_env,
            const char* start_env = nullptr) {
  if (tail_env) setenv("MEMLANE_BATCH_TAIL", tail_env, 1);
  else unsetenv("MEMLANE_BATCH_TAIL");
  if (start_env) setenv("MEMLANE_BATCH_TAIL_START", start_env, 1);
  else unsetenv("MEMLANE_BATCH_TAIL_START");
  Outcome o;
  std::vector<uint8_t> bytes = b.build();
  Plan plan;
  o.r.status = parse_plan(bytes.data(), bytes.size(), &plan, &o.r.message);
  if (o.r.status != Status::kOk) return o;
  BackendOptions opts;
  opts.threads = threads;
  auto be = make_cpu_backend(opts, &o.r.status, &o.r.message);
  if (!be || (o.r.status = be->prepare(plan, maxBatch, &o.r.message)) != Status::kOk) return o;
  o.tailBytesPerSample = be->memory_stats().batchTailBytesPerSample;
  o.tailRun = be->notes().find("batch tail") != std::string::npos;
  Rng r;
  std::vector<V> in;
  for (int64_t id : b.inputs) in.push_back(r.vec(size_t(batch * b.tensors[size_t(id)].bytes / 4)));
  std::vector<const float*> ip;
  for (auto& v : in) ip.push_back(v.data());
  std::vector<float*> op;
  for (int64_t id : b.outputs) {
    o.r.outputs.emplace_back(size_t(batch * b.tensors[size_t(id)].bytes / 4), -12345.f);
    op.push_back(o.r.outputs.back().data());
  }
  o.r.status = be->run(batch, ip.data(), op.data(), &o.r.message);
  return o;
}

float max_diff(const V& a, const V& b) {
  if (a.size() != b.size()) return 1e30f;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

void same_as_chunked(const PlanBuilder& b, int64_t maxBatch, int64_t batch, int threads, const char* start = nullptr) {
  const std::string at = "maxBatch " + std::to_string(maxBatch) + " batch " + std::to_string(batch) + " threads " +
                         std::to_string(threads) + (start ? std::string(" start ") + start : "");
  const Outcome ref = run(b, maxBatch, batch, threads, "0");
  const Outcome got = run(b, maxBatch, batch, threads, nullptr, start);
  CHECK_MSG(ref.r.status == Status::kOk && got.r.status == Status::kOk, at + ": " + ref.r.message + got.r.message);
  CHECK_MSG(ref.tailBytesPerSample == 0 && !ref.tailRun, at);
  CHECK_MSG(got.tailBytesPerSample > 0 && got.tailRun, at + ": no tail was run");
  for (size_t i = 0; i < ref.r.outputs.size() && i < got.r.outputs.size(); ++i)
    CHECK_MSG(max_diff(ref.r.outputs[i], got.r.outputs[i]) < 1e-4f,
              at + ": output " + std::to_string(i) + " differs by " + std::to_string(max_diff(ref.r.outputs[i], got.r.outputs[i])));
}

void test_tail_choice() {
  std::vector<uint8_t> bytes = classifier_plan().build();
  Plan plan;
  std::string msg;
  CHECK(parse_plan(bytes.data(), bytes.size(), &plan, &msg) == Status::kOk);
  unsetenv("MEMLANE_BATCH_TAIL");
  unsetenv("MEMLANE_BATCH_TAIL_START");
  const cpu::BatchTail t = cpu::plan_batch_tail(plan);
  // The conv's weights are less than its activations; Relu, GAP and Flatten carry no weights
  // and stay in the chunks: the tail starts at the first Gemm and reads Flatten's output.
  CHECK_MSG(t.start == 4, "tail start " + std::to_string(t.start));
  CHECK(t.carried.size() == 1 && plan.tensors[size_t(t.carried[0])].name == "f");
  CHECK(t.inputs.size() == 1 && plan.tensors[size_t(t.inputs[0])].name == "m");
  CHECK(t.outputFromTail.size() == 2 && !t.outputFromTail[0] && t.outputFromTail[1]);
  // The tail's arena: f, h, hr, g, m, logits per sample, tensors alive together apart.
  CHECK(t.tail.bytesPerSample >= t.tail.lowerBoundPerSample && t.tail.lowerBoundPerSample > 0);
  CHECK(t.tail.bytesPerSample < plan.bytesPerSample);
  auto off = [&](const char* n) {
    for (const auto& x : t.tail.tensors)
      if (x.name == n) return x.offset;
    return uint64_t(~0ull);
  };
  CHECK(off("h") != off("hr"));
  CHECK(off("m") != off("g") && off("m") != off("hr"));
  // A model too small to be worth it has no tail.
  PlanBuilder small;
  Rng r;
  const int x = small.input("x", {16, 32, 32});
  const int w = small.weight("w", {10, 16}, r.vec(160));
  const int p = small.act("p", {16, 1, 1});
  const int f = small.act("f", {16});
  const int y = small.output("y", {10});
  small.op("GlobalAveragePool", {x}, {p});
  small.op("Flatten", {p}, {f}, {{"axis", int64_t(1)}});
  small.op("Gemm", {f, w}, {y}, gemm_attrs());
  bytes = small.build();
  Plan sp;
  CHECK(parse_plan(bytes.data(), bytes.size(), &sp, &msg) == Status::kOk);
  CHECK(cpu::plan_batch_tail(sp).empty());
  // A conv whose weights (1 MiB, more than L2 holds on many CPUs) outweigh its activations on
  // a small late map joins the tail like a Gemm: the whole batch finds them in cache.
  std::vector<uint8_t> lb = late_conv_plan().build();
  Plan lp;
  CHECK(parse_plan(lb.data(), lb.size(), &lp, &msg) == Status::kOk);
  const cpu::BatchTail lt = cpu::plan_batch_tail(lp);
  CHECK_MSG(lt.start == 0, "late conv plan: tail start " + std::to_string(lt.start));
}

}  // namespace

int main() {
  test_tail_choice();
  const PlanBuilder b = classifier_plan();
  for (int threads : {1, 2}) {
    same_as_chunked(b, 8, 8, threads);
    same_as_chunked(b, 8, 5, threads);  // fewer samples than the arena was planned for
    same_as_chunked(b, 8, 1, threads);
    same_as_chunked(b, 16, 13, threads);
    same_as_chunked(b, 8, 8, threads, "0");  // every op in the tail: no prefix at all
    same_as_chunked(b, 8, 7, threads, "2");  // from the GAP: the conv's output carried
    same_as_chunked(late_conv_plan(), 8, 8, threads);  // the whole plan in the tail, by the rule
    same_as_chunked(late_conv_plan(), 8, 3, threads);
  }
  // A batch of one is never split, so no tail is run; its arena a sample is reported all the
  // same (memlane estimate's load probe loads at maxBatch 1).
  const Outcome whole = run(b, 1, 1, 2, nullptr);
  CHECK(whole.r.status == Status::kOk && !whole.tailRun);
  CHECK(whole.tailBytesPerSample == run(b, 8, 8, 1, nullptr).tailBytesPerSample);
  unsetenv("MEMLANE_BATCH_TAIL");
  unsetenv("MEMLANE_BATCH_TAIL_START");
  return finish("batch_tail_test");
}
