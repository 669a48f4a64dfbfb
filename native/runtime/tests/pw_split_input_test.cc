// A pointwise conv that sums many input channels per output channel, on a small map or after a
// Concat or a pool, at batch 1 on 2-4 threads, splits its input channels between the threads and
// adds their partial sums (ConvKernel::run_pointwise_split_input, conv_pointwise.cc). Checks, against a double
// reference: output channels in a pair of panels, in pairs and an odd panel, in one partial
// panel; input channels not a multiple of 16 (the last thread's share runs on to C); bias or
// none, Relu, Clip; a fused residual Add (+ Relu) written in place over the residual; 2, 3 and
// 4 threads; past 256 pixels after a Concat or a pool, on both SIMD pointwise kernels. And that
// the split ran: its two halves' sums round differently from one thread's
// single sum (so the outputs differ from the 1-thread run in the last bits), where a shape
// outside the rule, or a batch of 2, gives one thread's floats exactly.
#include <algorithm>
#include <string>

#include "cpu/conv_kernel.h"
#include "cpu/simd/avx512.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using V = std::vector<float>;
using S = std::vector<int64_t>;

namespace {

struct Case {
  const char* label;
  int64_t C, M, side;
  bool bias;
  const char* act;  // "none", "relu", "clip6"
  bool residual;    // + x's own M-channel input through the Add (M == residual channels)
};

// y[m][p] = act(sum_c w[m][c] x[c][p] + b[m] (+ r[m][p])), in doubles.
V reference(const Case& k, const V& x, const V& w, const V& b, const V& r) {
  const int64_t P = k.side * k.side;
  V y(size_t(k.M * P));
  for (int64_t m = 0; m < k.M; ++m)
    for (int64_t p = 0; p < P; ++p) {
      double s = k.bias ? b[size_t(m)] : 0;
      for (int64_t c = 0; c < k.C; ++c) s += double(w[size_t(m * k.C + c)]) * x[size_t(c * P + p)];
      if (k.residual) s += r[size_t(m * P + p)];
      const std::string a = k.act;
      if (a == "relu") s = std::max(s, 0.0);
      if (a == "clip6") s = std::min(std::max(s, 0.0), 6.0);
      y[size_t(m * P + p)] = float(s);
    }
  return y;
}

// The conv and its activation op (the backend folds a Relu or Clip into the conv), or with the
// residual: x and r inputs, Conv(x) + r (-> Relu), y written over r's bytes (the Add in place,
// as the planner lays out MobileNet's projections).
PlanBuilder plan(const Case& k, const V& w, const V& b) {
  PlanBuilder pb;
  const int x = pb.input("x", {k.C, k.side, k.side});
  const int wi = pb.weight("w", {k.M, k.C, 1, 1}, w);
  const int bi = k.bias ? pb.weight("b", {k.M}, b) : -1;
  const Attrs conv = {{"kernel", S{1, 1}}, {"strides", S{1, 1}}, {"pads", S{0, 0, 0, 0}}};
  const std::string act = k.act;
  const S shape = {k.M, k.side, k.side};
  const int r = k.residual ? pb.input("r", shape) : -1;
  const int c = act == "none" && !k.residual ? pb.output("y", shape) : pb.act("c", shape);
  pb.op("Conv", {x, wi, bi}, {c}, conv);
  int last = c;
  if (k.residual) {
    last = act == "none" ? pb.output("y", shape) : pb.act("s", shape);
    pb.tensors[size_t(last)].offset = pb.tensors[size_t(r)].offset;
    pb.op("Add", {c, r}, {last});
  }
  if (act == "none") return pb;
  const int y = pb.output("y", shape);
  if (k.residual) pb.tensors[size_t(y)].offset = pb.tensors[size_t(r)].offset;
  if (act == "relu") pb.op("Relu", {last}, {y});
  else pb.op("Clip", {last}, {y}, {{"min", 0.0}, {"max", 6.0}});
  return pb;
}

}  // namespace

int main() {
  using memlane::cpu::conv_detail::kSplitInputMaxPixels;
  using memlane::cpu::conv_detail::kSplitInputMinRatio;
  using memlane::cpu::conv_detail::kSplitInputMinShare;
  if (!memlane::cpu::simd::have_avx512()) {
    std::printf("pw_split_input_test: skipped, the channels-in-lanes kernel needs AVX-512\n");
    return finish("pw_split_input_test");
  }
  Rng rng;
  const Case split[] = {
      {"384 -> 64 at 14x14 (MobileNet's projection), bias, Relu", 384, 64, 14, true, "relu", false},
      {"330 -> 80 at 7x7: a pair and an odd panel, C not a multiple of 16", 330, 80, 7, true, "none", false},
      {"128 -> 32 at 10x10: 64 channels a thread at 2 threads, too few at 3", 128, 32, 10, true, "relu", false},
      {"200 -> 16 at 9x9: one 16-channel panel, no bias, Clip", 200, 16, 9, false, "clip6", false},
      {"512 -> 48 at 13x13 (SqueezeNet's squeeze)", 512, 48, 13, true, "relu", false},
      {"576 -> 96 at 14x14, residual Add in place", 576, 96, 14, true, "none", true},
      {"256 -> 64 at 16x16, residual Add + Relu in place", 256, 64, 16, true, "relu", true},
  };
  for (const Case& k : split) {
    const int64_t P = k.side * k.side;
    CHECK_MSG(k.C >= kSplitInputMinRatio * k.M && P <= kSplitInputMaxPixels, std::string(k.label) + ": not a split shape");
    const V x = rng.vec(size_t(k.C * P)), w = rng.vec(size_t(k.M * k.C)), b = rng.vec(size_t(k.M));
    const V r = rng.vec(size_t(k.M * P));
    const PlanBuilder pb = plan(k, w, b);
    const std::vector<V> in = k.residual ? std::vector<V>{x, r} : std::vector<V>{x};
    const V want = reference(k, x, w, b, r);
    const float tol = 1e-4f * std::max(1.f, float(k.C) / 1024.f);
    RunResult one = run_plan(pb, 1, in, 1);
    CHECK_MSG(one.status == memlane::Status::kOk, one.message);
    if (one.status != memlane::Status::kOk) continue;
    CHECK_CLOSE(one.outputs[0], want, tol, std::string(k.label) + ", 1 thread");
    for (int threads : {2, 3, 4}) {
      RunResult many = run_plan(pb, 1, in, threads);
      const std::string label = std::string(k.label) + ", " + std::to_string(threads) + " threads";
      CHECK_MSG(many.status == memlane::Status::kOk, label + ": " + many.message);
      if (many.status != memlane::Status::kOk) continue;
      CHECK_CLOSE(many.outputs[0], want, tol, label);
      // (fewer than kSplitInputMinShare channels a thread: the output split, one thread's floats)
      const bool split_ran = max_abs_diff(many.outputs[0], one.outputs[0]) > 0.f;
      if (k.C >= kSplitInputMinShare * threads)
        CHECK_MSG(split_ran, label + ": the same floats as 1 thread (the input channels were not split)");
      else
        CHECK_MSG(!split_ran, label + ": split with fewer than kSplitInputMinShare input channels a thread");
    }
  }
  // Past kSplitInputMaxPixels the split runs where X comes from a Concat of channels or a pool
  // (both split a sample by channels): on the pixels-in-lanes kernel (1089 pixels) and the
  // lanes one (400); not where X is a graph input.
  {
    const int64_t side = 33, P = side * side, C = 160, M = 40;
    const V a = rng.vec(size_t(80 * P)), b2 = rng.vec(size_t(80 * P)), w = rng.vec(size_t(M * C)), b = rng.vec(size_t(M));
    const Case k{"", C, M, side, true, "none", false};
    V x(size_t(C * P));
    std::copy(a.begin(), a.end(), x.begin());
    std::copy(b2.begin(), b2.end(), x.begin() + 80 * P);
    const V want = reference(k, x, w, b, {});
    for (bool concat : {true, false}) {
      PlanBuilder pb;
      int xi;
      std::vector<V> in;
      if (concat) {
        const int ai = pb.input("a", {80, side, side}), bi = pb.input("b", {80, side, side});
        xi = pb.act("x", {C, side, side});
        pb.op("Concat", {ai, bi}, {xi}, {{"axis", int64_t(1)}});
        in = {a, b2};
      } else {
        xi = pb.input("x", {C, side, side});
        in = {x};
      }
      const int wi = pb.weight("w", {M, C, 1, 1}, w), bi = pb.weight("bias", {M}, b), yi = pb.output("y", {M, side, side});
      pb.op("Conv", {xi, wi, bi}, {yi}, {{"kernel", S{1, 1}}, {"strides", S{1, 1}}, {"pads", S{0, 0, 0, 0}}});
      CHECK(conv_kernel_path(pb, concat ? 1 : 0) == "pointwise_simd");
      RunResult one = run_plan(pb, 1, in, 1), two = run_plan(pb, 1, in, 2);
      const std::string label = std::string("160 -> 40 at 33x33 after ") + (concat ? "a Concat" : "a graph input");
      CHECK_MSG(one.status == memlane::Status::kOk && two.status == memlane::Status::kOk, one.message + two.message);
      if (one.status != memlane::Status::kOk || two.status != memlane::Status::kOk) continue;
      CHECK_CLOSE(two.outputs[0], want, 1e-4f, label);
      CHECK_MSG((max_abs_diff(one.outputs[0], two.outputs[0]) > 0.f) == concat,
                label + (concat ? ": not split" : ": split without a producer that splits by channels"));
    }
  }
  {
    const int64_t C = 256, M = 64, in_side = 40, side = 20, P = side * side;
    const V x = rng.vec(size_t(C * in_side * in_side)), w = rng.vec(size_t(M * C)), b = rng.vec(size_t(M));
    V pooled(size_t(C * P));
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t i = 0; i < side; ++i)
        for (int64_t j = 0; j < side; ++j) {
          const float* q = x.data() + (ch * in_side + 2 * i) * in_side + 2 * j;
          pooled[size_t(ch * P + i * side + j)] = std::max(std::max(q[0], q[1]), std::max(q[in_side], q[in_side + 1]));
        }
    const V want = reference(Case{"", C, M, side, true, "none", false}, pooled, w, b, {});
    PlanBuilder pb;
    const int xi = pb.input("x", {C, in_side, in_side}), pi = pb.act("p", {C, side, side});
    pb.op("MaxPool", {xi}, {pi}, {{"kernel", S{2, 2}}, {"strides", S{2, 2}}});
    const int wi = pb.weight("w", {M, C, 1, 1}, w), bi = pb.weight("bias", {M}, b), yi = pb.output("y", {M, side, side});
    pb.op("Conv", {pi, wi, bi}, {yi}, {{"kernel", S{1, 1}}, {"strides", S{1, 1}}, {"pads", S{0, 0, 0, 0}}});
    CHECK(conv_kernel_path(pb, 1) == "pointwise_lanes");
    RunResult one = run_plan(pb, 1, {x}, 1), two = run_plan(pb, 1, {x}, 2);
    CHECK_MSG(one.status == memlane::Status::kOk && two.status == memlane::Status::kOk, one.message + two.message);
    if (one.status == memlane::Status::kOk && two.status == memlane::Status::kOk) {
      CHECK_CLOSE(two.outputs[0], want, 1e-4f, "256 -> 64 at 20x20 after a MaxPool");
      CHECK_MSG(max_abs_diff(one.outputs[0], two.outputs[0]) > 0.f, "256 -> 64 at 20x20 after a MaxPool: not split");
    }
  }
  // Outside the rule (too few input channels per output channel; too many pixels) and at a
  // batch of 2, the threads split the output: each sum as one thread's.
  const Case whole[] = {
      {"200 -> 64 at 14x14: 3 input channels an output", 200, 64, 14, true, "relu", false},
      {"384 -> 64 at 17x17: 289 pixels", 384, 64, 17, true, "relu", false},
  };
  for (const Case& k : whole) {
    const int64_t P = k.side * k.side;
    const V x = rng.vec(size_t(k.C * P)), w = rng.vec(size_t(k.M * k.C)), b = rng.vec(size_t(k.M));
    const PlanBuilder pb = plan(k, w, b);
    RunResult one = run_plan(pb, 1, {x}, 1), two = run_plan(pb, 1, {x}, 2);
    CHECK_MSG(one.status == memlane::Status::kOk && two.status == memlane::Status::kOk, one.message + two.message);
    if (one.status == memlane::Status::kOk && two.status == memlane::Status::kOk)
      CHECK_MSG(max_abs_diff(one.outputs[0], two.outputs[0]) == 0.f, std::string(k.label) + ": 2 threads changed the floats");
  }
  {
    const Case& k = split[0];
    const int64_t P = k.side * k.side;
    const V x = rng.vec(size_t(2 * k.C * P)), w = rng.vec(size_t(k.M * k.C)), b = rng.vec(size_t(k.M));
    const PlanBuilder pb = plan(k, w, b);
    RunResult one = run_plan(pb, 2, {x}, 1), two = run_plan(pb, 2, {x}, 2);
    CHECK_MSG(one.status == memlane::Status::kOk && two.status == memlane::Status::kOk, one.message + two.message);
    if (one.status == memlane::Status::kOk && two.status == memlane::Status::kOk)
      CHECK_MSG(max_abs_diff(one.outputs[0], two.outputs[0]) == 0.f, "a batch of 2 on 2 threads changed the floats");
  }
  return finish("pw_split_input_test");
}
