// The CNN / data-movement ops of the CPU backend (Clip, HardSigmoid, HardSwish, SiLU, Pad,
// Split, Concat with weights, ConvTranspose) against straightforward references (LSTM:
// lstm_test.cc).
#include <algorithm>
#include <cmath>

#include "cpu/cnn_ops.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using memlane::Status;
using V = std::vector<float>;
using S = std::vector<int64_t>;

static void test_activations() {
  Rng rng;
  const int64_t n = 3, E = 45;
  V x = rng.vec(n * E);
  for (auto& v : x) v *= 8.f;
  struct Case { const char* op; Attrs attrs; float (*f)(float); };
  const Case cases[] = {
      {"Clip", {{"min", 0.0}, {"max", 6.0}}, [](float v) { return std::min(std::max(v, 0.f), 6.f); }},
      {"Clip", {{"max", int64_t(1)}}, [](float v) { return std::min(v, 1.f); }},
      {"Clip", {{"min", -0.5}}, [](float v) { return std::max(v, -0.5f); }},
      {"HardSigmoid", {}, [](float v) { return std::min(std::max(0.2f * v + 0.5f, 0.f), 1.f); }},
      {"HardSigmoid", {{"alpha", 1.0 / 6.0}, {"beta", 0.5}},
       [](float v) { return float(std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0)); }},
      {"HardSwish", {}, [](float v) { return float(v * std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0)); }},
      {"SiLU", {}, [](float v) { return float(v / (1.0 + std::exp(-double(v)))); }},
  };
  for (const auto& c : cases) {
    PlanBuilder pb;
    int xi = pb.input("x", {5, 9});
    int yi = pb.output("y", {5, 9});
    pb.op(c.op, {xi}, {yi}, c.attrs);
    V ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = c.f(x[i]);
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 4e-6f, c.op);
    }
  }
  PlanBuilder pb;  // min > max is refused at prepare
  int xi = pb.input("x", {4});
  int yi = pb.output("y", {4});
  pb.op("Clip", {xi}, {yi}, {{"min", 2.0}, {"max", 1.0}});
  RunResult r = run_plan(pb, 1, {V(4)});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "min");
}

// Reference pad: walk every output coordinate, map each back with an explicit reflection.
static V pad_ref(const V& x, S dims, S pads, int mode, float value) {
  const size_t r = dims.size();
  S od(r);
  for (size_t k = 0; k < r; ++k) od[k] = dims[k] + pads[k] + pads[r + k];
  int64_t total = 1;
  for (auto d : od) total *= d;
  V y(static_cast<size_t>(total));
  for (int64_t f = 0; f < total; ++f) {
    int64_t rem = f, src = 0, stride = 1;
    bool inside = true;
    for (size_t k = r; k-- > 0;) {
      int64_t i = rem % od[k] - pads[k];
      rem /= od[k];
      const int64_t n = dims[k];
      if (i < 0 || i >= n) {
        if (mode == 0) inside = false;
        else if (mode == 2) i = i < 0 ? 0 : n - 1;
        else
          while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
      }
      src += i * stride;
      stride *= n;
    }
    y[size_t(f)] = inside ? x[size_t(src)] : value;
  }
  return y;
}

static void test_pad() {
  Rng rng;
  const int64_t n = 2;
  struct Case { const char* label; S shape; S pads; const char* mode; int m; };
  const Case cases[] = {
      {"constant 4-D", {2, 3, 4}, {0, 0, 1, 2, 0, 1, 2, 1}, "constant", 0},
      {"reflect 4-D", {2, 3, 4}, {0, 0, 2, 3, 0, 1, 2, 1}, "reflect", 1},
      {"edge 4-D", {2, 3, 4}, {0, 0, 1, 2, 0, 1, 3, 1}, "edge", 2},
      {"reflect 3-D", {3, 5}, {0, 0, 2, 0, 0, 3}, "reflect", 1},
      {"constant channels + crop", {3, 5}, {0, 1, -1, 0, 2, -2}, "constant", 0},
      {"edge 3-D crop", {3, 5}, {0, 0, -2, 0, 1, 2}, "edge", 2},
  };
  for (const auto& c : cases) {
    const size_t r = c.shape.size() + 1;
    S full = c.shape;
    full.insert(full.begin(), n);
    S out;
    for (size_t k = 1; k < r; ++k) out.push_back(full[k] + c.pads[k] + c.pads[r + k]);
    int64_t per = 1;
    for (auto d : c.shape) per *= d;
    V x = rng.vec(size_t(n * per));
    PlanBuilder pb;
    int xi = pb.input("x", c.shape);
    int yi = pb.output("y", out);
    pb.op("Pad", {xi}, {yi}, {{"pads", c.pads}, {"mode", std::string(c.mode)}, {"value", 0.75}});
    RunResult rr = run_plan(pb, n, {x});
    CHECK_MSG(rr.status == Status::kOk, std::string(c.label) + ": " + rr.message);
    if (rr.status == Status::kOk) CHECK_CLOSE(rr.outputs[0], pad_ref(x, full, c.pads, c.m, 0.75f), 0.f, c.label);
  }
  PlanBuilder pb;  // the batch may not be padded
  int xi = pb.input("x", {3});
  int yi = pb.output("y", {3});
  pb.op("Pad", {xi}, {yi}, {{"pads", S{1, 0, 0, 0}}});
  RunResult rr = run_plan(pb, 1, {V(3)});
  CHECK(rr.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(rr.message, "batch");
}

// ConvTranspose by its definition: every input pixel scatters x * w into y at ih * s - pad + i * d.
static void test_conv_transpose() {
  Rng rng;
  struct Case { const char* label; int64_t C, H, W, M; int kh, kw, s, d, g, pt, pl, pb, pr; bool bias; };
  const Case cases[] = {
      {"k2 s2", 4, 3, 4, 6, 2, 2, 2, 1, 1, 0, 0, 0, 0, true},
      {"k3 s2 p1 output_padding 1", 3, 4, 3, 2, 3, 3, 2, 1, 1, 1, 1, 0, 0, false},
      {"k4 s2 p1 2 groups", 4, 3, 3, 6, 4, 4, 2, 1, 2, 1, 1, 1, 1, true},
      {"depthwise dilated", 3, 4, 5, 3, 3, 3, 1, 2, 3, 1, 2, 1, 0, true},
      {"1-D as 2-D, k8 s4 p2", 2, 1, 6, 3, 1, 8, 4, 1, 1, 0, 2, 0, 2, true},
      {"a row beyond the window (negative end pads)", 2, 3, 3, 2, 3, 3, 2, 1, 1, 0, 0, -1, -1, true},
  };
  const int64_t n = 2;
  for (const Case& c : cases) {
    const int64_t Cg = c.C / c.g, Mg = c.M / c.g;
    const int64_t OH = (c.H - 1) * c.s + int64_t(c.d) * (c.kh - 1) + 1 - c.pt - c.pb;
    const int64_t OW = (c.W - 1) * c.s + int64_t(c.d) * (c.kw - 1) + 1 - c.pl - c.pr;
    V x = rng.vec(size_t(n * c.C * c.H * c.W)), w = rng.vec(size_t(c.g * Mg * c.kh * c.kw * Cg)), b = rng.vec(size_t(c.M));
    V ref(size_t(n * c.M * OH * OW));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t p = 0; p < OH * OW; ++p) ref[size_t((k * c.M + m) * OH * OW + p)] = c.bias ? b[size_t(m)] : 0.f;
    for (int64_t k = 0; k < n; ++k)
      for (int64_t ci = 0; ci < c.C; ++ci)
        for (int64_t ih = 0; ih < c.H; ++ih)
          for (int64_t iw = 0; iw < c.W; ++iw)
            for (int64_t mg = 0; mg < Mg; ++mg)
              for (int i = 0; i < c.kh; ++i)
                for (int j = 0; j < c.kw; ++j) {
                  const int64_t oh = ih * c.s - c.pt + i * c.d, ow = iw * c.s - c.pl + j * c.d;
                  if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                  const int64_t g = ci / Cg, m = g * Mg + mg;
                  const float wv = w[size_t((((g * Mg + mg) * c.kh + i) * c.kw + j) * Cg + ci % Cg)];
                  ref[size_t(((k * c.M + m) * OH + oh) * OW + ow)] += x[size_t(((k * c.C + ci) * c.H + ih) * c.W + iw)] * wv;
                }
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int wi = pb.weight("w", {c.g, Mg, c.kh, c.kw, Cg}, w);
    int bi = c.bias ? pb.weight("b", {c.M}, b) : -1;
    int yi = pb.output("y", {c.M, OH, OW});
    pb.op("ConvTranspose", {xi, wi, bi}, {yi},
          {{"kernel", S{c.kh, c.kw}}, {"strides", S{c.s, c.s}}, {"pads", S{c.pt, c.pl, c.pb, c.pr}},
           {"dilations", S{c.d, c.d}}, {"group", int64_t(c.g)}});
    RunResult rr = run_plan(pb, n, {x});
    CHECK_MSG(rr.status == Status::kOk, std::string(c.label) + ": " + rr.message);
    if (rr.status == Status::kOk) CHECK_CLOSE(rr.outputs[0], ref, 1e-5f, c.label);
  }
  // An output the window does not give is refused, naming both.
  PlanBuilder pb;
  int xi = pb.input("x", {2, 3, 3});
  int wi = pb.weight("w", {1, 2, 2, 2, 2}, V(16, 0.5f));
  int yi = pb.output("y", {2, 7, 6});
  pb.op("ConvTranspose", {xi, wi, -1}, {yi}, {{"kernel", S{2, 2}}, {"strides", S{2, 2}}, {"pads", S{0, 0, 0, 0}}});
  RunResult rr = run_plan(pb, 1, {V(18)});
  CHECK(rr.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(rr.message, "does not match the window's [6, 6]");
}

static void test_split_concat() {
  Rng rng;
  const int64_t n = 3;
  for (int64_t axis : {1, 2}) {  // [n, 6, 4] into 1 + 3 + 2 along axis 1, or [n, 4, 6] along 2
    const S shape = axis == 1 ? S{6, 4} : S{4, 6};
    const S parts = {1, 3, 2};
    V x = rng.vec(size_t(n * 24));
    PlanBuilder pb;
    int xi = pb.input("x", shape);
    std::vector<int64_t> outs;
    for (int64_t p : parts) outs.push_back(pb.output("y" + std::to_string(p), axis == 1 ? S{p, 4} : S{4, p}));
    pb.op("Split", {xi}, outs, {{"axis", axis}, {"split", parts}});
    RunResult r = run_plan(pb, n, {x}, 2);
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status != Status::kOk) continue;
    int64_t at = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      V ref;
      for (int64_t s = 0; s < n; ++s)
        for (int64_t i = 0; i < (axis == 1 ? parts[k] : 4); ++i)
          for (int64_t j = 0; j < (axis == 1 ? 4 : parts[k]); ++j)
            ref.push_back(axis == 1 ? x[size_t(s * 24 + (at + i) * 4 + j)] : x[size_t(s * 24 + i * 6 + at + j)]);
      CHECK_CLOSE(r.outputs[k], ref, 0.f, "split part " + std::to_string(k) + " axis " + std::to_string(axis));
      at += parts[k];
    }
  }
  {  // sizes that do not add up are refused
    PlanBuilder pb;
    int xi = pb.input("x", {4});
    int a = pb.output("a", {1}), b = pb.output("b", {2});
    pb.op("Split", {xi}, {a, b}, {{"axis", int64_t(1)}, {"split", S{1, 2}}});
    RunResult r = run_plan(pb, 1, {V(4)});
    CHECK(r.status == Status::kUnsupportedOp);
    CHECK_CONTAINS(r.message, "add up");
  }
  {  // Concat of a weight [1, 1, 4] (a class token) and an activation [n, 3, 4] along axis 1
    V tok = rng.vec(4), x = rng.vec(size_t(n * 12));
    PlanBuilder pb;
    int wi = pb.weight("tok", {1, 1, 4}, tok);
    int xi = pb.input("x", {3, 4});
    int yi = pb.output("y", {4, 4});
    pb.op("Concat", {wi, xi}, {yi}, {{"axis", int64_t(1)}});
    V ref;
    for (int64_t s = 0; s < n; ++s) {
      ref.insert(ref.end(), tok.begin(), tok.end());
      ref.insert(ref.end(), x.begin() + s * 12, x.begin() + s * 12 + 12);
    }
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, "concat weight");
    }
  }
  {  // ... along the last axis, weight [1, 3, 2]
    V w = rng.vec(6), x = rng.vec(size_t(n * 12));
    PlanBuilder pb;
    int xi = pb.input("x", {3, 4});
    int wi = pb.weight("w", {1, 3, 2}, w);
    int yi = pb.output("y", {3, 6});
    pb.op("Concat", {xi, wi}, {yi}, {{"axis", int64_t(2)}});
    V ref;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < 3; ++i) {
        ref.insert(ref.end(), x.begin() + s * 12 + i * 4, x.begin() + s * 12 + i * 4 + 4);
        ref.insert(ref.end(), w.begin() + i * 2, w.begin() + i * 2 + 2);
      }
    RunResult r = run_plan(pb, n, {x});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, "concat weight last axis");
  }
}

// transpose_nd against index arithmetic, perms that move the batch included.
static void test_transpose_nd() {
  Rng rng;
  struct Case { S dims; std::vector<int> perm; };
  const Case cases[] = {{{3, 4, 5}, {1, 0, 2}}, {{2, 3, 4, 5}, {2, 0, 1, 3}}, {{2, 3, 4, 5}, {0, 2, 1, 3}},
                        {{2, 2, 3, 2, 3}, {0, 2, 1, 3, 4}}, {{4, 6}, {1, 0}}, {{2, 1, 3, 2, 2, 3}, {5, 4, 3, 2, 1, 0}},
                        // axes merged first (merge_transpose_axes): runs that stay neighbours,
                        // size-1 axes anywhere, identities, everything of size 1
                        {{2, 3, 4, 5}, {2, 3, 0, 1}}, {{2, 3, 4, 5}, {0, 1, 3, 2}}, {{3, 1, 4}, {2, 1, 0}},
                        {{2, 3, 4}, {0, 1, 2}}, {{1, 1, 1}, {2, 0, 1}}, {{2, 4, 1, 3, 3}, {0, 3, 4, 2, 1}},
                        {{2, 1, 3, 1, 4}, {0, 4, 3, 2, 1}}};
  for (const auto& c : cases) {
    const int r = int(c.dims.size());
    int64_t n = 1;
    for (auto d : c.dims) n *= d;
    const size_t total = static_cast<size_t>(n), rank = static_cast<size_t>(r);
    V x = rng.vec(total), y(total, -1.f), ref(total);
    S st(rank, 1), od(rank);
    for (int k = r - 2; k >= 0; --k) st[size_t(k)] = st[size_t(k + 1)] * c.dims[size_t(k + 1)];
    for (int k = 0; k < r; ++k) od[size_t(k)] = c.dims[size_t(c.perm[size_t(k)])];
    for (int64_t f = 0; f < n; ++f) {  // output flat index -> output coords -> input offset
      int64_t rem = f, src = 0;
      for (int k = r - 1; k >= 0; --k) {
        src += (rem % od[size_t(k)]) * st[size_t(c.perm[size_t(k)])];
        rem /= od[size_t(k)];
      }
      ref[size_t(f)] = x[size_t(src)];
    }
    memlane::cpu::transpose_nd(x.data(), y.data(), r, c.dims.data(), c.perm.data());
    CHECK_CLOSE(y, ref, 0.f, "transpose_nd rank " + std::to_string(r));
  }
}

int main() {
  test_transpose_nd();
  test_activations();
  test_pad();
  test_split_concat();
  test_conv_transpose();
  return finish("cnn_ops_test");
}
