// Concat inputs in place (plan/concat_in_place.h): a plan that lays a Concat's inputs in their
// slices of its output runs one sample at a time on the CPU backend, whatever the chunk budget,
// and gives the outputs of the same plan laid out apart; concat_inputs_apart (what the CUDA
// backend runs) moves exactly the in-place tensors, family members included, and runs whole
// batches; the Concats of an in-place plan copy nothing (their kernel path says so); a plan
// that cannot run one sample at a time is refused, naming the field.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "op_runner.h"
#include "plan/concat_in_place.h"

using namespace mltest;
using namespace memlane;
using S = std::vector<int64_t>;

namespace {

struct Ids {
  int a, b, y2, c, y3;
};

// x [4,4,4] -> a = relu(1x1 conv, 8 ch), b = relu(3x3 conv, 4 ch); y2 = Concat(a, b) [12];
// c = 1x1 conv of y2 (4 ch); y3 = Concat(a, b, c) [16] (a DenseNet-like family: y2 begins
// y3); out = 1x1 conv of y3 (3 ch). in_place: a, b, c at their slices of y3 and y2 at y3.
PlanBuilder model(bool in_place, Ids* ids) {
  Rng rng;
  PlanBuilder pb;
  int x = pb.input("x", {4, 4, 4});
  int w1 = pb.weight("w1", {8, 4, 1, 1}, rng.vec(32));
  int w2 = pb.weight("w2", {4, 4, 3, 3}, rng.vec(144));
  int w3 = pb.weight("w3", {4, 12, 1, 1}, rng.vec(48));
  int w4 = pb.weight("w4", {3, 16, 1, 1}, rng.vec(48));
  Ids t;
  t.a = pb.act("a", {8, 4, 4});
  t.b = pb.act("b", {4, 4, 4});
  t.y2 = pb.act("y2", {12, 4, 4});
  t.c = pb.act("c", {4, 4, 4});
  t.y3 = pb.act("y3", {16, 4, 4});
  int out = pb.output("out", {3, 4, 4});
  const Attrs one = {{"kernel", S{1, 1}}};
  pb.op("Conv", {x, w1, -1}, {t.a}, {{"kernel", S{1, 1}}, {"activation", std::string("relu")}});
  pb.op("Conv", {x, w2, -1}, {t.b}, {{"kernel", S{3, 3}}, {"pads", S{1, 1, 1, 1}}, {"activation", std::string("relu")}});
  pb.op("Concat", {t.a, t.b}, {t.y2}, {{"axis", int64_t(1)}});
  pb.op("Conv", {t.y2, w3, -1}, {t.c}, one);
  pb.op("Concat", {t.a, t.b, t.c}, {t.y3}, {{"axis", int64_t(1)}});
  pb.op("Conv", {t.y3, w4, -1}, {out}, one);
  if (in_place) {
    auto& T = pb.tensors;
    const int64_t base = T[size_t(t.y3)].offset;
    T[size_t(t.a)].offset = base;
    T[size_t(t.b)].offset = base + T[size_t(t.a)].bytes;
    T[size_t(t.c)].offset = base + T[size_t(t.a)].bytes + T[size_t(t.b)].bytes;
    T[size_t(t.y2)].offset = base;
    pb.concat_in_place = true;
  }
  *ids = t;
  return pb;
}

Plan parsed(const PlanBuilder& pb, std::vector<uint8_t>* bytes) {
  *bytes = pb.build();
  Plan plan;
  std::string msg;
  CHECK_MSG(parse_plan(bytes->data(), bytes->size(), &plan, &msg) == Status::kOk, msg);
  return plan;
}

std::vector<float> run(const Plan& plan, int64_t batch, const std::vector<float>& x, int threads) {
  BackendOptions o;
  o.threads = threads;
  Status st;
  std::string msg;
  auto be = make_cpu_backend(o, &st, &msg);
  CHECK_MSG(be && be->prepare(plan, batch, &msg) == Status::kOk, msg);
  std::vector<float> out(size_t(batch * 48), -12345.f);
  const float* in[] = {x.data()};
  float* outs[] = {out.data()};
  CHECK_MSG(be->run(batch, in, outs, &msg) == Status::kOk, msg);
  return out;
}

// The kernel path of each Concat in the op profile after one run: "in_place" where it copies nothing.
std::vector<std::string> concat_paths(const Plan& plan) {
  BackendOptions o;
  Status st;
  std::string msg;
  auto be = make_cpu_backend(o, &st, &msg);
  CHECK_MSG(be && be->prepare(plan, 1, &msg) == Status::kOk, msg);
  CHECK(be->set_profiling(true));
  std::vector<float> x(64, 0.5f), out(48);
  const float* in[] = {x.data()};
  float* outs[] = {out.data()};
  CHECK_MSG(be->run(1, in, outs, &msg) == Status::kOk, msg);
  std::vector<std::string> paths;
  for (const auto& t : be->op_profile().ops)
    if (t.opType == "Concat") paths.push_back(t.kernel);
  return paths;
}

}  // namespace

int main() {
  Ids ids;
  std::vector<uint8_t> bytes_ref, bytes_in;
  const Plan ref = parsed(model(false, &ids), &bytes_ref);
  const Plan in = parsed(model(true, &ids), &bytes_in);
  CHECK(in.concatInPlace && !ref.concatInPlace);

  // Which tensors lie in place, by the readers' rule.
  const Op& concat2 = in.ops[2];
  const Op& concat3 = in.ops[4];
  CHECK(concat_input_in_place(in, concat2, 0) && concat_input_in_place(in, concat2, 1));
  for (size_t k = 0; k < 3; ++k) CHECK(concat_input_in_place(in, concat3, k));
  CHECK(concat_output_in_place(in, concat2) && !concat_output_in_place(in, concat3));
  CHECK(!concat_input_in_place(ref, ref.ops[4], 0) && !concat_output_in_place(ref, ref.ops[2]));
  // The flag is what makes them so: the same offsets without it are not in place.
  Plan unflagged = in;
  unflagged.concatInPlace = false;
  CHECK(!concat_input_in_place(unflagged, concat3, 0));

  // The Concat kernels skip their copies exactly where the plan lays every input in place.
  CHECK(concat_paths(in) == (std::vector<std::string>{"in_place", "in_place"}));
  CHECK(concat_paths(ref) == (std::vector<std::string>{"", ""}));

  // Laid apart: the five moved past the old arena, each its own place; the head stays.
  const Plan apart = concat_inputs_apart(in);
  CHECK(!apart.concatInPlace);
  CHECK(apart.tensors[size_t(ids.y3)].offset == in.tensors[size_t(ids.y3)].offset);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (int id : {ids.a, ids.b, ids.c, ids.y2}) {
    const TensorInfo& t = apart.tensors[size_t(id)];
    CHECK(t.offset >= in.bytesPerSample && t.offset % 64 == 0 && t.offset + t.bytes <= apart.bytesPerSample);
    for (const auto& [o, e] : spans) CHECK(t.offset + t.bytes <= o || t.offset >= e);
    spans.emplace_back(t.offset, t.offset + t.bytes);
  }
  CHECK(!concat_input_in_place(apart, apart.ops[4], 0));
  CHECK(concat_paths(apart) == (std::vector<std::string>{"", ""}));

  Rng rng;
  for (int64_t batch : {1, 5}) {
    const std::vector<float> x = rng.vec(size_t(batch * 64));
    for (int threads : {1, 2}) {
      const std::vector<float> want = run(ref, batch, x, threads);
      // Whatever the chunk budget: a budget of the whole batch would run the in-place plan's
      // batch at once, its inputs' slices overlapping the next samples'.
      for (const char* budget : {"", "1000000000"}) {
        if (*budget) setenv("MEMLANE_CHUNK_BYTES", budget, 1);
        else unsetenv("MEMLANE_CHUNK_BYTES");
        const std::vector<float> got = run(in, batch, x, threads);
        const std::vector<float> got_apart = run(apart, batch, x, threads);
        float d = 0.f;
        for (size_t i = 0; i < want.size(); ++i) d = std::max({d, std::fabs(got[i] - want[i]), std::fabs(got_apart[i] - want[i])});
        CHECK_MSG(d <= 1e-5f, "batch " + std::to_string(batch) + ", " + std::to_string(threads) + " threads, chunk budget '" +
                                  budget + "': max abs diff " + std::to_string(d));
      }
    }
  }
  unsetenv("MEMLANE_CHUNK_BYTES");

  // A plan whose batch is not first cannot run one sample at a time: refused, naming the field.
  {
    PlanBuilder pb;
    int x = pb.input("x", {4, 2});
    int t = pb.tensor("t", {4, -1, 2}, "activation");
    int y = pb.output("y", {4, 2});
    pb.op("Transpose", {x, -1}, {t}, {{"perm", S{1, 0, 2}}});
    pb.op("Transpose", {t, -1}, {y}, {{"perm", S{1, 0, 2}}});
    (void)y;
    pb.concat_in_place = true;
    std::vector<uint8_t> bytes;
    const Plan p = parsed(pb, &bytes);
    BackendOptions o;
    Status st;
    std::string msg;
    auto be = make_cpu_backend(o, &st, &msg);
    CHECK(be->prepare(p, 2, &msg) == Status::kInvalidArgument);
    CHECK_CONTAINS(msg, "arena.concatInPlace");
  }
  return finish("concat_in_place_test");
}
