// The transformer ops of the CPU backend (LayerNormalization, batched MatMul, elementwise
// math, Reduce*) against straightforward double-precision references, through whole plans
// (batch > 1, one and two threads) and, for the raw kernels, directly.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "cpu/reduce.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using memlane::Status;
using V = std::vector<float>;
using S = std::vector<int64_t>;

static int64_t count(const S& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

static void test_layernorm() {
  Rng rng;
  const int64_t n = 3;
  struct Case { S shape; int64_t axis; bool bias; };
  for (const Case& c : {Case{{4, 40}, 2, true}, Case{{2, 3, 5}, 2, false}, Case{{5, 7}, 1, true}}) {
    S full = c.shape;
    full.insert(full.begin(), n);
    const int64_t len = count(S(full.begin() + c.axis, full.end())), rows = count(full) / len;
    V x = rng.vec(size_t(count(full))), g = rng.vec(size_t(len)), b = rng.vec(size_t(len));
    for (auto& v : x) v = v * 3.f + 5.f;  // a large mean: the variance must not cancel
    PlanBuilder pb;
    int xi = pb.input("x", c.shape);
    int gi = pb.weight("g", S(full.begin() + c.axis, full.end()), g);
    int bi = c.bias ? pb.weight("b", {len}, b) : -1;
    int yi = pb.output("y", c.shape);
    pb.op("LayerNormalization", {xi, gi, bi}, {yi}, {{"axis", c.axis}, {"epsilon", 1e-5}});
    V ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < len; ++i) m += x[size_t(r * len + i)];
      m /= double(len);
      for (int64_t i = 0; i < len; ++i) v += (x[size_t(r * len + i)] - m) * (x[size_t(r * len + i)] - m);
      const double inv = 1.0 / std::sqrt(v / double(len) + 1e-5);
      for (int64_t i = 0; i < len; ++i)
        ref[size_t(r * len + i)] = float((x[size_t(r * len + i)] - m) * inv * g[size_t(i)] + (c.bias ? b[size_t(i)] : 0.f));
    }
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 2e-5f, "layernorm");
    }
  }
  // A scale of the wrong size is refused at prepare, naming it.
  PlanBuilder pb;
  int xi = pb.input("x", {4, 6});
  int gi = pb.weight("g", {4}, V(4, 1.f));
  int yi = pb.output("y", {4, 6});
  pb.op("LayerNormalization", {xi, gi}, {yi}, {{"axis", int64_t(2)}, {"epsilon", 1e-5}});
  RunResult r = run_plan(pb, 1, {V(24)});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "scale");
}

// Naive batched matmul with numpy broadcasting over leading dims (full shapes, batch included).
static V matmul_ref(const V& a, S as, const V& b, S bs, const S& ys) {
  const size_t r = ys.size();
  while (as.size() < r) as.insert(as.begin(), 1);
  while (bs.size() < r) bs.insert(bs.begin(), 1);
  const int64_t M = ys[r - 2], N = ys[r - 1], K = as[r - 1];
  const int64_t slices = count(ys) / (M * N);
  V y(size_t(count(ys)));
  for (int64_t s = 0; s < slices; ++s) {
    int64_t rem = s, oa = 0, ob = 0, sa = M * K, sb = K * N;
    for (int i = int(r) - 3; i >= 0; --i) {
      const int64_t q = rem % ys[size_t(i)];
      rem /= ys[size_t(i)];
      oa += (as[size_t(i)] == 1 ? 0 : q) * sa;
      ob += (bs[size_t(i)] == 1 ? 0 : q) * sb;
      sa *= as[size_t(i)];
      sb *= bs[size_t(i)];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(a[size_t(oa + i * K + k)]) * b[size_t(ob + k * N + j)];
        y[size_t(s * M * N + i * N + j)] = float(acc);
      }
  }
  return y;
}

static void test_matmul_batched() {
  Rng rng;
  const int64_t n = 2;
  struct Case { const char* label; S a; bool aw; S b; bool bw; S y; };
  const Case cases[] = {
      {"QxK^T [n,H,S,d]x[n,H,d,S]", {3, 5, 4}, false, {3, 4, 5}, false, {3, 5, 5}},
      {"attn x V, broadcast heads", {3, 5, 5}, false, {1, 5, 4}, false, {3, 5, 4}},
      {"4-D both activations", {2, 3, 6, 7}, false, {2, 3, 7, 2}, false, {2, 3, 6, 2}},
      {"large slices (sgemm path)", {2, 48, 40}, false, {2, 40, 36}, false, {2, 48, 36}},
      {"N-D weight B", {3, 5, 4}, false, {3, 4, 6}, true, {3, 5, 6}},
      {"weight A [M,K]", {6, 4}, true, {3, 4, 5}, false, {3, 6, 5}},
  };
  for (const Case& c : cases) {
    auto full = [&](const S& s, bool w) { S f = s; if (!w) f.insert(f.begin(), n); return f; };
    S af = full(c.a, c.aw), bf = full(c.b, c.bw), yf = full(c.y, false);
    V a = rng.vec(size_t(count(af))), b = rng.vec(size_t(count(bf)));
    PlanBuilder pb;
    std::vector<V> ins;
    int ai = c.aw ? pb.weight("a", c.a, a) : (ins.push_back(a), pb.input("a", c.a));
    int bi = c.bw ? pb.weight("b", c.b, b) : (ins.push_back(b), pb.input("b", c.b));
    int yi = pb.output("y", c.y);
    pb.op("MatMul", {ai, bi}, {yi});
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, ins, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.label) + ": " + r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], matmul_ref(a, af, b, bf, yf), 2e-5f, c.label);
    }
  }
  // Leading dims that do not broadcast are refused, naming the shapes.
  PlanBuilder pb;
  int ai = pb.input("a", {3, 5, 4});
  int bi = pb.input("b", {2, 4, 5});
  int yi = pb.output("y", {3, 5, 5});
  pb.op("MatMul", {ai, bi}, {yi});
  RunResult r = run_plan(pb, 1, {V(60), V(40)});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "broadcast");
}

static void test_math() {
  Rng rng;
  const int64_t n = 2, E = 37;
  // Each op's domain: x in [-1, 1) (inside Asin, Acos, Atanh), scaled by 4 (both sides of the
  // activations' knees), positive, at least 1 (Acosh), and wide (where exp overflows float).
  V x = rng.vec(size_t(n * E)), x4(x.size()), pos(x.size()), ge1(x.size()), wide(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x4[i] = x[i] * 4.f;
    pos[i] = std::fabs(x[i]) * 3.f + 0.1f;
    ge1[i] = std::fabs(x[i]) * 3.f + 1.f;
    wide[i] = x[i] * 100.f;
  }
  struct Case { const char* op; Attrs attrs; const V* in; double (*f)(double); };
  const Case cases[] = {
      {"Sqrt", {}, &pos, [](double v) { return std::sqrt(v); }},
      {"Reciprocal", {}, &pos, [](double v) { return 1 / v; }},
      {"Exp", {}, &x, [](double v) { return std::exp(v); }},
      {"Neg", {}, &x, [](double v) { return -v; }},
      {"Log", {}, &pos, [](double v) { return std::log(v); }},
      {"Abs", {}, &x, [](double v) { return std::fabs(v); }},
      {"Sin", {}, &x, [](double v) { return std::sin(v); }},
      {"Cos", {}, &x, [](double v) { return std::cos(v); }},
      {"Tan", {}, &x, [](double v) { return std::tan(v); }},
      {"Asin", {}, &x, [](double v) { return std::asin(v); }},
      {"Acos", {}, &x, [](double v) { return std::acos(v); }},
      {"Atan", {}, &wide, [](double v) { return std::atan(v); }},
      {"Sinh", {}, &x4, [](double v) { return std::sinh(v); }},
      {"Cosh", {}, &x4, [](double v) { return std::cosh(v); }},
      {"Asinh", {}, &wide, [](double v) { return std::asinh(v); }},
      {"Acosh", {}, &ge1, [](double v) { return std::acosh(v); }},
      {"Atanh", {}, &x, [](double v) { return std::atanh(v); }},
      {"Elu", {}, &x4, [](double v) { return v > 0 ? v : std::expm1(v); }},
      {"Elu", {{"alpha", 0.3}}, &x4, [](double v) { return v > 0 ? v : 0.3 * std::expm1(v); }},
      {"Selu", {}, &x4, [](double v) { return 1.05070102214813232421875 * (v > 0 ? v : 1.67326319217681884765625 * std::expm1(v)); }},
      {"Selu", {{"alpha", 2.0}, {"gamma", 0.5}}, &x4, [](double v) { return 0.5 * (v > 0 ? v : 2 * std::expm1(v)); }},
      {"Celu", {{"alpha", 1.5}}, &x4, [](double v) { return std::max(v, 0.0) + std::min(0.0, 1.5 * std::expm1(v / 1.5)); }},
      {"ThresholdedRelu", {{"alpha", 0.5}}, &x4, [](double v) { return v > 0.5 ? v : 0.0; }},
      {"Softplus", {}, &wide, [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))); }},
      {"Softsign", {}, &wide, [](double v) { return v / (1 + std::fabs(v)); }},
      {"Mish", {}, &wide, [](double v) { return v * std::tanh(std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v)))); }},
      {"Pow", {{"exponent", 2.0}}, &x, [](double v) { return v * v; }},
      {"Pow", {{"exponent", 3.0}}, &x, [](double v) { return v * v * v; }},
      {"Pow", {{"exponent", 0.5}}, &pos, [](double v) { return std::sqrt(v); }},
      {"Pow", {{"exponent", 1.7}}, &pos, [](double v) { return std::pow(v, 1.7); }},
  };
  for (const Case& c : cases) {
    const V& in = *c.in;
    PlanBuilder pb;
    int xi = pb.input("x", {E});
    int yi = pb.output("y", {E});
    pb.op(c.op, {xi}, {yi}, c.attrs);
    V ref(in.size());
    for (size_t i = 0; i < in.size(); ++i) ref[i] = float(c.f(in[i]));
    RunResult r = run_plan(pb, n, {in});
    CHECK_MSG(r.status == Status::kOk, r.message);
    float tol = 0;
    for (float v : ref) tol = std::max(tol, 2e-6f * std::fabs(v));
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, std::max(tol, 1e-6f), c.op);
  }
  // RoPE's angles reach position x frequency: hundreds of radians, where a reduction mod 2pi
  // in float32 would be off by far more than this.
  V angles(x.size());
  for (size_t i = 0; i < x.size(); ++i) angles[i] = x[i] * 300.f;
  for (const char* op : {"Sin", "Cos"}) {
    PlanBuilder pb;
    int xi = pb.input("x", {E});
    int yi = pb.output("y", {E});
    pb.op(op, {xi}, {yi});
    V ref(angles.size());
    for (size_t i = 0; i < angles.size(); ++i) ref[i] = float(op[0] == 'S' ? std::sin(double(angles[i])) : std::cos(double(angles[i])));
    RunResult r = run_plan(pb, n, {angles});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 1e-6f, op);
  }
}

// Reference reduction over the full shape (batch first), keepdims layout.
static V reduce_ref(char kind, const V& x, const S& shape, const std::vector<bool>& red) {
  S out = shape;
  for (size_t i = 0; i < shape.size(); ++i) if (red[i]) out[i] = 1;
  const int64_t total = count(shape);
  std::vector<double> acc(size_t(count(out)), kind == 'x' ? -DBL_MAX : 0.0);
  int64_t cnt = total / count(out);
  for (int64_t idx = 0; idx < total; ++idx) {
    int64_t rem = idx, o = 0, os = 1;
    for (int i = int(shape.size()) - 1; i >= 0; --i) {
      const int64_t q = rem % shape[size_t(i)];
      rem /= shape[size_t(i)];
      if (!red[size_t(i)]) o += q * os;
      os *= out[size_t(i)];
    }
    acc[size_t(o)] = kind == 'x' ? std::max(acc[size_t(o)], double(x[size_t(idx)])) : acc[size_t(o)] + x[size_t(idx)];
  }
  V y(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) y[i] = float(kind == 'm' ? acc[i] / double(cnt) : acc[i]);
  return y;
}

static void test_reduce() {
  Rng rng;
  const int64_t n = 3;
  struct Case { const char* op; char kind; S shape; S axes; bool keep; };
  const Case cases[] = {
      {"ReduceMean", 'm', {4, 40}, {2}, true},          // x.mean(-1, keepdim=True) of a LayerNorm
      {"ReduceSum", 's', {4, 5, 6}, {1}, false},        // a middle axis
      {"ReduceMax", 'x', {4, 5, 6}, {1, 3}, true},      // two axes apart
      {"ReduceMean", 'm', {2, 3, 4, 5}, {2, 3}, false}, // adjacent axes (merged)
      {"ReduceSum", 's', {7, 1, 9}, {1, 2}, true},      // a size-1 axis among them
  };
  for (const Case& c : cases) {
    S full = c.shape;
    full.insert(full.begin(), n);
    std::vector<bool> red(full.size(), false);
    for (auto a : c.axes) red[size_t(a)] = true;
    S out;
    for (size_t i = 1; i < full.size(); ++i) if (!red[i] || c.keep) out.push_back(red[i] ? 1 : full[i]);
    V x = rng.vec(size_t(count(full)));
    PlanBuilder pb;
    int xi = pb.input("x", c.shape);
    int yi = pb.output("y", out);
    pb.op(c.op, {xi}, {yi}, {{"axes", c.axes}, {"keepdims", c.keep}});
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.op) + ": " + r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], reduce_ref(c.kind, x, full, red), 2e-6f, c.op);
    }
  }
  // The raw kernel: nothing reduced is a copy.
  const int64_t dims[2] = {2, 3};
  const bool none[2] = {false, false};
  V x = {1, 2, 3, 4, 5, 6}, y(6);
  memlane::cpu::reduce_axes(memlane::cpu::ReduceKind::kSum, x.data(), y.data(), dims, none, 2);
  CHECK_CLOSE(y, x, 0.f, "reduce copy");
  // The batch axis can never be reduced: the reader refuses axis 0.
  PlanBuilder pb;
  int xi = pb.input("x", {4});
  int yi = pb.output("y", {4});
  pb.op("ReduceSum", {xi}, {yi}, {{"axes", S{0}}, {"keepdims", true}});
  RunResult r = run_plan(pb, 1, {V(4)});
  CHECK(r.status != Status::kOk);
  CHECK_CONTAINS(r.message, "axes");
}

// Attention as the exporters emit it: (Q x K^T) * scale + mask -> Softmax -> x V.
static void test_attention_chain() {
  Rng rng;
  const int64_t n = 2, H = 2, T = 6, d = 4;
  V q = rng.vec(size_t(n * H * T * d)), kt = rng.vec(size_t(n * H * d * T)), v = rng.vec(size_t(n * H * T * d));
  V mask(size_t(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) mask[size_t(i * T + j)] = j > i ? -1e9f : 0.f;
  PlanBuilder pb;
  int qi = pb.input("q", {H, T, d}), ki = pb.input("kt", {H, d, T}), vi = pb.input("v", {H, T, d});
  int s1 = pb.act("scores", {H, T, T}), s2 = pb.act("scaled", {H, T, T}), s3 = pb.act("masked", {H, T, T});
  int p = pb.act("probs", {H, T, T});
  int sc = pb.weight("scale", {1}, {0.5f});
  int mi = pb.weight("mask", {1, 1, T, T}, mask);
  int yi = pb.output("y", {H, T, d});
  pb.op("MatMul", {qi, ki}, {s1});
  pb.op("Mul", {s1, sc}, {s2});
  pb.op("Add", {s2, mi}, {s3});
  pb.op("Softmax", {s3}, {p}, {{"axis", int64_t(3)}});
  pb.op("MatMul", {p, vi}, {yi});
  V ref(size_t(n * H * T * d));
  for (int64_t s = 0; s < n * H; ++s)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> w(static_cast<size_t>(T));
      double m = -DBL_MAX, sum = 0;
      for (int64_t j = 0; j < T; ++j) {
        double a = 0;
        for (int64_t k = 0; k < d; ++k) a += double(q[size_t((s * T + i) * d + k)]) * kt[size_t((s * d + k) * T + j)];
        w[size_t(j)] = a * 0.5 + mask[size_t(i * T + j)];
        m = std::max(m, w[size_t(j)]);
      }
      for (auto& e : w) sum += (e = std::exp(e - m));
      for (int64_t k = 0; k < d; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < T; ++j) acc += w[size_t(j)] / sum * v[size_t((s * T + j) * d + k)];
        ref[size_t((s * T + i) * d + k)] = float(acc);
      }
    }
  RunResult r = run_plan(pb, n, {q, kt, v});
  CHECK_MSG(r.status == Status::kOk, r.message);
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 1e-5f, "attention chain");
  // The same as one fused Attention op (what src/compiler/fuse-attention.ts emits), with one
  // and two threads; and with S above the kernel's row block (several blocks a slice).
  for (int threads : {1, 2}) {
    PlanBuilder fb;
    int fq = fb.input("q", {H, T, d}), fk = fb.input("kt", {H, d, T}), fv = fb.input("v", {H, T, d});
    int fm = fb.weight("mask", {1, 1, T, T}, mask);
    int fy = fb.output("y", {H, T, d});
    fb.op("Attention", {fq, fk, fv, fm}, {fy}, {{"scale", 0.5}});
    RunResult f = run_plan(fb, n, {q, kt, v}, threads);
    CHECK_MSG(f.status == Status::kOk, f.message);
    if (f.status == Status::kOk) CHECK_CLOSE(f.outputs[0], ref, 1e-5f, "fused attention");
  }
}

// Fused Attention with a per-sample activation mask [n, 1, 1, T] (BERT's padding mask) and
// more query rows than one block, against the unfused ops on the same plan runner.
static void test_attention_fused_activation_mask() {
  Rng rng;
  const int64_t n = 3, H = 2, S = 70, d = 5;
  V q = rng.vec(size_t(n * H * S * d)), kt = rng.vec(size_t(n * H * d * S)), v = rng.vec(size_t(n * H * S * d));
  V mask = rng.vec(size_t(n * S));
  auto build = [&](bool fused) {
    PlanBuilder pb;
    int qi = pb.input("q", {H, S, d}), ki = pb.input("kt", {H, d, S}), vi = pb.input("v", {H, S, d});
    int mi = pb.input("mask", {1, 1, S});
    int yi = pb.output("y", {H, S, d});
    if (fused) {
      pb.op("Attention", {qi, ki, vi, mi}, {yi}, {{"scale", 0.25}});
      return pb;
    }
    int s1 = pb.act("scores", {H, S, S}), s2 = pb.act("scaled", {H, S, S}), s3 = pb.act("masked", {H, S, S});
    int p = pb.act("probs", {H, S, S});
    int sc = pb.weight("scale", {1}, {0.25f});
    pb.op("MatMul", {qi, ki}, {s1});
    pb.op("Mul", {s1, sc}, {s2});
    pb.op("Add", {s2, mi}, {s3});
    pb.op("Softmax", {s3}, {p}, {{"axis", int64_t(3)}});
    pb.op("MatMul", {p, vi}, {yi});
    return pb;
  };
  RunResult want = run_plan(build(false), n, {q, kt, v, mask});
  RunResult got = run_plan(build(true), n, {q, kt, v, mask}, 2);
  CHECK_MSG(want.status == Status::kOk && got.status == Status::kOk, want.message + got.message);
  if (want.status == Status::kOk && got.status == Status::kOk) CHECK_CLOSE(got.outputs[0], want.outputs[0], 1e-5f, "fused attention, activation mask");
}

int main() {
  test_layernorm();
  test_matmul_batched();
  test_math();
  test_reduce();
  test_attention_chain();
  test_attention_fused_activation_mask();
  return finish("transformer_ops_test");
}
