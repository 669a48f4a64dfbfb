// Plan v2 on the CPU backend: int64/int32/bool tensors, the batch at any axis (and k x batch),
// and the run-time data ops (Gather, Cast, Where, comparisons, logic, Mod, Expand, Slice,
// Range, ConstantOfShape, PRelu), each against a reference computed here.
#include <cstdint>
#include <vector>

#include "harness.h"
#include "op_runner.h"
#include "plan/plan.h"

using namespace mltest;
using memlane::Status;
using I64 = std::vector<int64_t>;
using F = std::vector<float>;
using B8 = std::vector<uint8_t>;

static void test_gather_embedding() {
  PlanBuilder b;
  const F table = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42};  // [5, 3]
  int w = b.weight("table", {5, 3}, table);
  int ids = b.tensor("ids", {-1, 4}, "input", "int64");
  int y = b.tensor("emb", {-1, 4, 3}, "output");
  b.op("Gather", {w, ids}, {y}, {{"axis", int64_t(0)}});
  const I64 idx = {0, 4, -1, 2, 1, 1, 3, -5};  // -1 = 4, -5 = 0 (ONNX wraps negative indices)
  RawResult r = run_raw(b, 2, {bytes_of(idx)});
  CHECK_MSG(r.status == Status::kOk, r.message);
  F want;
  for (int64_t i : idx) {
    const int64_t k = i < 0 ? i + 5 : i;
    for (int e = 0; e < 3; ++e) want.push_back(table[size_t(k * 3 + e)]);
  }
  CHECK(r.out<float>(0) == want);
  // An index out of range fails the request with a message naming it; it never reads outside.
  const I64 bad = {0, 1, 7, 2, 0, 0, 0, 0};
  RawResult e = run_raw(b, 2, {bytes_of(bad)});
  CHECK(e.status == Status::kInvalidArgument);
  CHECK_CONTAINS(e.message, "index 7 is out of range [-5, 5)");
}

static void test_gather_activation_axis() {
  // x[:, 2] on [batch, 4, 3] with a constant scalar index (BERT's pooler picks token 0 this way).
  PlanBuilder b;
  int x = b.tensor("x", {-1, 4, 3}, "input");
  int i = b.typed_weight<int64_t>("i", {}, "int64", {2});
  int y = b.tensor("y", {-1, 3}, "output");
  b.op("Gather", {x, i}, {y}, {{"axis", int64_t(1)}});
  F xs(24);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = float(k);
  RawResult r = run_raw(b, 2, {bytes_of(xs)});
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK((r.out<float>(0) == F{6, 7, 8, 18, 19, 20}));
}

static void test_cast_compare_logic() {
  PlanBuilder b;
  int m = b.tensor("mask", {-1, 3}, "input", "int64");
  int f = b.tensor("maskf", {-1, 3}, "output");
  int zero = b.typed_weight<int64_t>("zero", {1}, "int64", {0});
  int eq = b.tensor("eq", {-1, 3}, "activation", "bool");
  int ne = b.tensor("ne", {-1, 3}, "output", "bool");
  int two = b.typed_weight<int64_t>("two", {}, "int64", {2});
  int lt = b.tensor("lt", {-1, 3}, "activation", "bool");
  int gt = b.tensor("gt", {-1, 3}, "activation", "bool");
  int both = b.tensor("and", {-1, 3}, "output", "bool");
  int either = b.tensor("or", {-1, 3}, "output", "bool");
  int back = b.tensor("i32", {-1, 3}, "output", "int32");
  b.op("Cast", {m}, {f}, {{"to", std::string("float32")}});
  b.op("Equal", {m, zero}, {eq});
  b.op("Not", {eq}, {ne});
  b.op("Less", {m, two}, {lt});
  b.op("Greater", {m, zero}, {gt});
  b.op("And", {lt, gt}, {both});
  b.op("Or", {eq, gt}, {either});
  b.op("Cast", {f}, {back}, {{"to", std::string("int32")}});
  int le = b.tensor("le", {-1, 3}, "output", "bool");
  int ge = b.tensor("ge", {-1, 3}, "output", "bool");
  b.op("LessOrEqual", {m, zero}, {le});
  b.op("GreaterOrEqual", {m, two}, {ge});
  const I64 mask = {1, 0, 3, -2, 1, 0};
  RawResult r = run_raw(b, 2, {bytes_of(mask)});
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK((r.out<float>(0) == F{1, 0, 3, -2, 1, 0}));
  CHECK((r.out<uint8_t>(1) == B8{1, 0, 1, 1, 1, 0}));
  CHECK((r.out<uint8_t>(2) == B8{1, 0, 0, 0, 1, 0}));
  CHECK((r.out<uint8_t>(3) == B8{1, 1, 1, 0, 1, 1}));
  CHECK((r.out<int32_t>(4) == std::vector<int32_t>{1, 0, 3, -2, 1, 0}));
  CHECK((r.out<uint8_t>(5) == B8{0, 1, 0, 1, 0, 1}));
  CHECK((r.out<uint8_t>(6) == B8{0, 0, 1, 0, 0, 0}));
}

static void test_where_mod_int_arith() {
  PlanBuilder b;
  int c = b.tensor("c", {-1, 2}, "input", "bool");
  int x = b.tensor("x", {-1, 2}, "input");
  int neg = b.weight("neg", {1}, {-1e9f});  // an additive attention mask's fill value
  int y = b.tensor("y", {-1, 2}, "output");
  b.op("Where", {c, x, neg}, {y});
  int a = b.tensor("a", {-1, 2}, "input", "int64");
  int three = b.typed_weight<int64_t>("three", {1}, "int64", {3});
  int zero = b.typed_weight<int64_t>("zero", {1}, "int64", {0});
  int md = b.tensor("mod", {-1, 2}, "output", "int64");
  int dv = b.tensor("div0", {-1, 2}, "output", "int64");
  int sm = b.tensor("sum", {-1, 2}, "output", "int64");
  b.op("Mod", {a, three}, {md}, {{"fmod", int64_t(0)}});
  b.op("Div", {a, zero}, {dv});
  b.op("Add", {a, three}, {sm});
  int xf = b.tensor("xf", {-1, 2}, "activation");
  int fm = b.tensor("fmod", {-1, 2}, "output");
  int threef = b.weight("threef", {1}, {3.f});
  b.op("Cast", {a}, {xf}, {{"to", std::string("float32")}});
  b.op("Mod", {xf, threef}, {fm}, {{"fmod", int64_t(1)}});
  RawResult r = run_raw(b, 2, {bytes_of(B8{1, 0, 0, 1}), bytes_of(F{1.5f, 2.5f, 3.5f, 4.5f}), bytes_of(I64{-7, 7, 5, -1})});
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK((r.out<float>(0) == F{1.5f, -1e9f, -1e9f, 4.5f}));
  CHECK((r.out<int64_t>(1) == I64{2, 1, 2, 2}));   // Python-style: the divisor's sign
  CHECK((r.out<int64_t>(2) == I64{0, 0, 0, 0}));   // integer x / 0 is 0, never a trap
  CHECK((r.out<int64_t>(3) == I64{-4, 10, 8, 2}));
  CHECK((r.out<float>(4) == F{-1, 1, 2, -1}));     // C fmod: the dividend's sign
}

// PRelu: x where x >= 0, x times its slope below; the slope per channel ([C, 1]) and shared ([1]).
static void test_prelu() {
  PlanBuilder b;
  int x = b.tensor("x", {-1, 2, 3}, "input");
  int per_channel = b.weight("slope", {2, 1}, {0.5f, -2.f});
  int shared = b.weight("slope1", {1}, {0.1f});
  int y = b.tensor("y", {-1, 2, 3}, "output");
  int z = b.tensor("z", {-1, 2, 3}, "output");
  b.op("PRelu", {x, per_channel}, {y});
  b.op("PRelu", {x, shared}, {z});
  RawResult r = run_raw(b, 1, {bytes_of(F{-2, 0, 3, -1, 4, -0.5f})});
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK((r.out<float>(0) == F{-1, 0, 3, 2, 4, 1}));
  CHECK((r.out<float>(1) == F{-0.2f, 0, 3, -0.1f, 4, -0.05f}));
  // Float only, by name.
  PlanBuilder c;
  int ids = c.tensor("ids", {-1, 2}, "input", "int64");
  int two = c.typed_weight<int64_t>("two", {1}, "int64", {2});
  c.op("PRelu", {ids, two}, {c.tensor("o", {-1, 2}, "output", "int64")});
  r = run_raw(c, 1, {bytes_of(I64{-1, 2})});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "PRelu computes on float32, not int64");
}

static void test_expand_slice_generators() {
  PlanBuilder b;
  // ViT's class token: a weight [1, 1, 3] expanded over the batch.
  int tok = b.weight("cls", {1, 1, 3}, {7, 8, 9});
  int e = b.tensor("expanded", {-1, 1, 3}, "output");
  b.op("Expand", {tok}, {e});
  // x[:, 4::-2, 1:3] on [batch, 5, 4].
  int x = b.tensor("x", {-1, 5, 4}, "input");
  int s = b.tensor("sliced", {-1, 3, 2}, "output");
  b.op("Slice", {x}, {s}, {{"axes", I64{1, 2}}, {"starts", I64{4, 1}}, {"steps", I64{-2, 1}}});
  int rg = b.tensor("range", {-1}, "output", "int64");
  b.op("Range", {}, {rg}, {{"start", int64_t(0)}, {"delta", int64_t(1)}});
  int ones = b.tensor("ones", {-1, 2}, "output", "int64");
  b.op("ConstantOfShape", {}, {ones}, {{"value", int64_t(1)}});
  F xs(40);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = float(k);
  RawResult r = run_raw(b, 2, {bytes_of(xs)}, 2);
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK((r.out<float>(0) == F{7, 8, 9, 7, 8, 9}));
  F want;
  for (int n = 0; n < 2; ++n)
    for (int i : {4, 2, 0})
      for (int j : {1, 2}) want.push_back(float(n * 20 + i * 4 + j));
  CHECK(r.out<float>(1) == want);
  CHECK((r.out<int64_t>(2) == I64{0, 1}));  // the whole batch, never per chunk
  CHECK((r.out<int64_t>(3) == I64{1, 1, 1, 1}));
}

// Slice's copy runs (slice.cc: whole trailing axes merged into the run of the last sliced
// one) against element-by-element indexing, on [batch, 6, 5, 4]: a channel split (one block a
// sample), a strided channel axis before whole ones (runs of H x W), a strided last axis (single
// elements), a negative step, a middle axis, nothing sliced but kept whole, and 2 threads.
static void test_slice_runs() {
  struct Case {
    const char* what;
    I64 axes, starts, steps, out;  // out: the output's non-batch dims
  };
  const std::vector<Case> cases = {
      {"channel split", {1}, {3}, {1}, {3, 5, 4}},
      {"channels, step 2, whole rows after", {1}, {1}, {2}, {3, 5, 4}},
      {"last axis, step 3", {3}, {0}, {3}, {6, 5, 2}},
      {"channels reversed", {1}, {5}, {-1}, {6, 5, 4}},
      {"rows 1..3 of each channel", {2}, {1}, {1}, {6, 3, 4}},
      {"rows step 2, last axis 1..2", {2, 3}, {0, 1}, {2, 1}, {6, 3, 2}},
      {"every axis whole (start 0 on axis 1)", {1}, {0}, {1}, {6, 5, 4}},
  };
  const int64_t N = 2, C = 6, H = 5, W = 4;
  F xs(size_t(N * C * H * W));
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = float(k);
  for (int threads : {1, 2})
    for (const Case& c : cases) {
      PlanBuilder b;
      int x = b.tensor("x", {-1, C, H, W}, "input");
      int y = b.tensor("y", {-1, c.out[0], c.out[1], c.out[2]}, "output");
      b.op("Slice", {x}, {y}, {{"axes", c.axes}, {"starts", c.starts}, {"steps", c.steps}});
      RawResult r = run_raw(b, N, {bytes_of(xs)}, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.what) + ": " + r.message);
      const int64_t in_dims[4] = {N, C, H, W};
      int64_t start[4] = {0, 0, 0, 0}, step[4] = {1, 1, 1, 1};
      for (size_t j = 0; j < c.axes.size(); ++j) start[c.axes[j]] = c.starts[j], step[c.axes[j]] = c.steps[j];
      F want;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < c.out[0]; ++i)
          for (int64_t h = 0; h < c.out[1]; ++h)
            for (int64_t w = 0; w < c.out[2]; ++w) {
              const int64_t ci = start[1] + i * step[1], hi = start[2] + h * step[2], wi = start[3] + w * step[3];
              want.push_back(xs[size_t(((n * in_dims[1] + ci) * in_dims[2] + hi) * in_dims[3] + wi)]);
            }
      CHECK_MSG(r.out<float>(0) == want, std::string(c.what) + " (threads " + std::to_string(threads) + ")");
    }
}

// Transposes whose last output axis is strided in the input run in 8x8 tiles
// (transpose_tiles.h) where the input's innermost axis is another output axis of 8 or more:
// NHWC <-> NCHW, a token <-> channel swap with ragged tile edges (13 x 21), a rank-5 perm, and
// one axis under 8 (the row gathers), at 1 and 2 threads, against indexing.
static void test_transpose_tiles() {
  struct Case {
    const char* what;
    I64 in, perm;  // the per-sample input dims; perm over them, the batch staying first
  };
  const std::vector<Case> cases = {
      {"NCHW -> NHWC", {16, 5, 9}, {1, 2, 0}},
      {"NHWC -> NCHW", {5, 9, 16}, {2, 0, 1}},
      {"[21, 13] -> [13, 21]", {21, 13}, {1, 0}},
      {"rank 5: [4, 10, 3, 12] -> [12, 4, 3, 10]", {4, 10, 3, 12}, {3, 0, 2, 1}},
      {"[6, 40] -> [40, 6] (rows of 6: gathered)", {6, 40}, {1, 0}},
  };
  const int64_t N = 2;
  for (int threads : {1, 2})
    for (const Case& c : cases) {
      const size_t r = c.in.size();
      std::vector<int64_t> in_shape{-1}, out_shape{-1}, perm{0};
      for (size_t i = 0; i < r; ++i) in_shape.push_back(c.in[i]), out_shape.push_back(c.in[size_t(c.perm[i])]), perm.push_back(c.perm[i] + 1);
      PlanBuilder b;
      int x = b.tensor("x", in_shape, "input");
      int y = b.tensor("y", out_shape, "output");
      b.op("Transpose", {x}, {y}, {{"perm", I64(perm.begin(), perm.end())}});
      int64_t per = 1;
      for (int64_t d : c.in) per *= d;
      F xs(size_t(N * per));
      for (size_t k = 0; k < xs.size(); ++k) xs[k] = float(k);
      RawResult res = run_raw(b, N, {bytes_of(xs)}, threads);
      CHECK_MSG(res.status == Status::kOk, std::string(c.what) + ": " + res.message);
      std::vector<int64_t> istr(r, 1);
      for (size_t i = r - 1; i > 0; --i) istr[i - 1] = istr[i] * c.in[i];
      F want;
      std::vector<int64_t> idx(r, 0);  // output index
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < per; ++o) {
          int64_t rem = o, off = n * per;
          for (size_t i = r; i-- > 0;) {
            const int64_t d = c.in[size_t(c.perm[i])];
            off += (rem % d) * istr[size_t(c.perm[i])];
            rem /= d;
          }
          want.push_back(xs[size_t(off)]);
        }
      CHECK_MSG(res.out<float>(0) == want, std::string(c.what) + " (threads " + std::to_string(threads) + ")");
    }
}

static void test_batch_not_first() {
  // torch's seq-first layout: [S=3, batch, E=2] -> [S, 2·batch] (k·batch) -> + bias -> back.
  PlanBuilder b;
  int x = b.tensor("x", {3, -1, 2}, "input");
  int r = b.tensor("r", {3, -2}, "activation");
  int bias = b.weight("bias", {1}, {100});
  int a = b.tensor("a", {3, -2}, "activation");
  int y = b.tensor("y", {3, -1, 2}, "output");
  b.op("Reshape", {x}, {r}, {{"shape", I64{3, -2}}});
  b.op("Add", {r, bias}, {a});
  b.op("Reshape", {a}, {y}, {{"shape", I64{3, -1, 2}}});
  int g = b.tensor("g", {3, -1}, "output");  // Gather on the last axis keeps the batch inside
  int i1 = b.typed_weight<int64_t>("i1", {}, "int64", {1});
  b.op("Gather", {x, i1}, {g}, {{"axis", int64_t(2)}});
  F xs(18);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = float(k);
  // threads 2, maxBatch 4, batch 3: the backend must run the whole batch at once (no lanes).
  RawResult out = run_raw(b, 3, {bytes_of(xs)}, 2, 4);
  CHECK_MSG(out.status == Status::kOk, out.message);
  F want = xs;
  for (auto& v : want) v += 100;
  CHECK(out.out<float>(0) == want);
  CHECK((out.out<float>(1) == F{1, 3, 5, 7, 9, 11, 13, 15, 17}));
}

static void test_refusals() {
  // A v1-era float kernel refuses an int64 tensor by name.
  PlanBuilder b;
  int x = b.tensor("ids", {-1, 2}, "input", "int64");
  int y = b.tensor("y", {-1, 2}, "output", "int64");
  b.op("Relu", {x}, {y});
  RawResult r = run_raw(b, 1, {bytes_of(I64{1, 2})});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "'ids' is int64; this kernel computes on float32 only");
  // ... and a batch-first kernel a tensor whose batch sits elsewhere.
  PlanBuilder c;
  int xi = c.tensor("x", {3, -1}, "input");
  int yo = c.tensor("y", {3, -1}, "output");
  c.op("Flatten", {xi}, {yo}, {{"axis", int64_t(1)}});
  r = run_raw(c, 1, {bytes_of(F{1, 2, 3})});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "needs the batch first");
  // The reader: an input with a k·batch dim, and a v1 file (recompile).
  PlanBuilder d;
  d.tensor("x", {-2, 3}, "input");
  int o = d.tensor("o", {-1, 6}, "output");
  d.op("Relu", {0}, {o});
  std::vector<uint8_t> bytes = d.build();
  memlane::Plan plan;
  std::string msg;
  CHECK(memlane::parse_plan(bytes.data(), bytes.size(), &plan, &msg) == Status::kPlanInvalid);
  CHECK_CONTAINS(msg, "a plain batch entry -1");
  PlanBuilder v1;
  v1.input("x", {2});
  v1.op("Relu", {0}, {v1.output("y", {2})});
  bytes = v1.build();
  bytes[8] = 1;
  CHECK(memlane::parse_plan(bytes.data(), bytes.size(), &plan, &msg) == Status::kPlanInvalid);
  CHECK_CONTAINS(msg, "recompile");
}

int main() {
  test_gather_embedding();
  test_gather_activation_axis();
  test_cast_compare_logic();
  test_where_mod_int_arith();
  test_prelu();
  test_expand_slice_generators();
  test_slice_runs();
  test_transpose_tiles();
  test_batch_not_first();
  test_refusals();
  return finish("data_ops_test");
}
