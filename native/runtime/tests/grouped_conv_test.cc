// Grouped convs (1 < channels a group) against a naive reference: the channel-blocked kernel
// (conv_grouped_blocked.h, AVX-512's or AVX2's) over the group widths it blocks differently (2, 3, 4, 6, 8, 16, 24,
// 32, 128 output channels a group: 8, 16, 4, 8, 2, 1, 2, 1, 1 groups a block), input and
// output widths that differ, 1x1 / 3x3 / 5x5 taps, strides 1 and 2, asymmetric pads,
// dilation 2, odd maps, banded 112-wide maps, batch > 1, 1 and 2 threads; then each fused
// activation against the unfused ops on the other paths. ctest runs it with
// MEMLANE_CONV_NO_GROUPED=1 too (the direct / im2col paths against the same reference).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cpu/conv_grouped_blocked.h"
#include "cpu/cpu_features.h"
#include "cpu/simd/avx2_gemm.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using memlane::Status;
using V = std::vector<float>;
using S = std::vector<int64_t>;

namespace {

struct Case {
  const char* label;
  int64_t n, C, H, W, M, k, s, pt, pl, pb, pr, d, g;
  bool bias, relu;
  int64_t OH() const { return (H + pt + pb - (d * (k - 1) + 1)) / s + 1; }
  int64_t OW() const { return (W + pl + pr - (d * (k - 1) + 1)) / s + 1; }
};

V reference(const Case& c, const V& x, const V& w, const V& b) {
  const int64_t OH = c.OH(), OW = c.OW(), Cg = c.C / c.g, Mg = c.M / c.g;
  V y(size_t(c.n * c.M * OH * OW));
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = c.bias ? b[size_t(m)] : 0.0;
          const int64_t gi = m / Mg;
          for (int64_t j = 0; j < Cg; ++j)
            for (int64_t i = 0; i < c.k; ++i)
              for (int64_t q = 0; q < c.k; ++q) {
                const int64_t ih = oh * c.s - c.pt + i * c.d, iw = ow * c.s - c.pl + q * c.d;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                s += double(x[size_t(((n * c.C + gi * Cg + j) * c.H + ih) * c.W + iw)]) *
                     w[size_t(((m * Cg + j) * c.k + i) * c.k + q)];
              }
          const float v = float(s);
          y[size_t(((n * c.M + m) * OH + oh) * OW + ow)] = c.relu ? std::max(v, 0.f) : v;
        }
  return y;
}

Attrs conv_attrs(const Case& c, const char* act) {
  return {{"kernel", S{c.k, c.k}},       {"strides", S{c.s, c.s}}, {"pads", S{c.pt, c.pl, c.pb, c.pr}},
          {"dilations", S{c.d, c.d}},    {"group", c.g},           {"activation", std::string(act)}};
}

// The path the kernel should take: the blocked one wherever it exists and is not turned off,
// AVX-512's or else AVX2's; "" for the other paths.
std::string expected_blocked_path() {
  if (std::getenv("MEMLANE_CONV_NO_GROUPED") != nullptr) return "";
  if (memlane::cpu::use_avx512f()) return "grouped_blocked";
  if (memlane::cpu::simd::have_avx2_gemm() && std::getenv("MEMLANE_CONV_GROUPED_NO_AVX2") == nullptr)
    return "grouped_blocked_avx2";  // (the same x86-64-v3 build condition as the AVX2 sgemm's)
  return "";
}

void test_against_reference() {
  const Case cases[] = {
      {"2 ch a group (8 groups a block), 9x11, batch 2", 2, 16, 9, 11, 16, 3, 1, 1, 1, 1, 1, 1, 8, true, true},
      {"4 ch a group, stride 2, 15x15 (2 blocks)", 1, 32, 15, 15, 32, 3, 2, 1, 1, 1, 1, 1, 8, true, false},
      {"8 ch a group, 14x14 (3 blocks of 2 groups)", 2, 48, 14, 14, 48, 3, 1, 1, 1, 1, 1, 1, 6, true, true},
      {"16 ch a group (regnet_x), stride 2, 28x28", 1, 48, 28, 28, 48, 3, 2, 1, 1, 1, 1, 1, 3, true, true},
      {"24 ch a group, 7x7, 3 groups (a padded group), batch 3", 3, 72, 7, 7, 72, 3, 1, 1, 1, 1, 1, 1, 3, true, false},
      {"32 ch a group (two vectors), 13x13", 2, 64, 13, 13, 64, 3, 1, 1, 1, 1, 1, 1, 2, false, true},
      {"128 ch a group (two passes of 4 vectors), 7x7", 1, 256, 7, 7, 256, 3, 1, 1, 1, 1, 1, 1, 2, true, true},
      {"8 in -> 16 out a group", 2, 24, 10, 10, 48, 3, 1, 1, 1, 1, 1, 1, 3, true, false},
      {"8 in -> 4 out a group (4 groups a block)", 1, 32, 9, 9, 16, 3, 1, 1, 1, 1, 1, 1, 4, true, true},
      {"4 in -> 3 out a group (16 groups a block, 6 groups)", 2, 24, 8, 8, 18, 3, 1, 1, 1, 1, 1, 1, 6, true, false},
      {"6 ch a group (8 groups a block, 3 vectors)", 1, 48, 11, 11, 48, 3, 2, 1, 1, 1, 1, 1, 8, true, true},
      {"grouped 1x1 (shufflenet), 10x10", 2, 32, 10, 10, 64, 1, 1, 0, 0, 0, 0, 1, 4, true, true},
      {"grouped 1x1 stride 2", 1, 32, 11, 11, 32, 1, 2, 0, 0, 0, 0, 1, 4, false, false},
      {"grouped 5x5 pad 2, 12x12", 2, 32, 12, 12, 32, 5, 1, 2, 2, 2, 2, 1, 4, true, true},
      {"grouped 5x5 stride 2, 17x17", 1, 32, 17, 17, 32, 5, 2, 2, 2, 2, 2, 1, 2, true, false},
      {"dilation 2, 17x17", 2, 32, 17, 17, 32, 3, 1, 2, 2, 2, 2, 2, 2, true, true},
      {"asymmetric pads (0, 1, 2, 1)", 2, 32, 9, 12, 32, 3, 1, 0, 1, 2, 1, 1, 2, true, false},
      {"no pads, stride 2, odd 13x13", 1, 32, 13, 13, 32, 3, 2, 0, 0, 0, 0, 1, 2, true, false},
      {"112x112 stride 2 in bands, 16 ch a group", 1, 32, 112, 112, 32, 3, 2, 1, 1, 1, 1, 1, 2, true, true},
      {"56x56 stride 1 in bands, 8 ch a group, batch 2", 2, 16, 56, 56, 16, 3, 1, 1, 1, 1, 1, 1, 2, true, true},
  };
  Rng rng;
  for (const Case& c : cases) {
    const int64_t Cg = c.C / c.g;
    V x = rng.vec(size_t(c.n * c.C * c.H * c.W)), w = rng.vec(size_t(c.M * Cg * c.k * c.k)), b = rng.vec(size_t(c.M));
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int wi = pb.weight("w", {c.M, Cg, c.k, c.k}, w);
    int bi = c.bias ? pb.weight("b", {c.M}, b) : -1;
    int yi = pb.output("y", {c.M, c.OH(), c.OW()});
    pb.op("Conv", {xi, wi, bi}, {yi}, conv_attrs(c, c.relu ? "relu" : "none"));
    const std::string path = conv_kernel_path(pb, 0);
    const std::string want_path = expected_blocked_path();
    CHECK_MSG((want_path.empty() ? path.rfind("grouped_blocked", 0) != 0 : path == want_path) &&
                  path.rfind("no kernel", 0) != 0,
              std::string(c.label) + ": path '" + path + "'");
    const V want = reference(c, x, w, b);
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, c.n, {x}, threads);
      const std::string label = std::string(c.label) + ", " + std::to_string(threads) + " thread(s)";
      CHECK_MSG(r.status == Status::kOk, label + ": " + r.message);
      if (r.status != Status::kOk) continue;
      const float d = max_abs_diff(r.outputs[0], want);
      CHECK_MSG(d <= 2e-4f, label + ": max abs diff " + std::to_string(d));
    }
  }
}

// Depthwise convs (one channel a group) on the maps where, without AVX-512, the grouped kernel
// takes them (grouped_blocked_takes_depthwise: strided, to 14x14 or less): 8 channels a block,
// the last block short of channels (C = 20, 44), 3x3 and 5x5, dilation 2, batch 3; and
// stride-1 neighbours that the depthwise kernel takes. Elsewhere (AVX-512, or a switch off) the
// depthwise kernel runs them all.
void test_depthwise_small_maps() {
  const Case cases[] = {
      {"dw 3x3 stride 2, 24x24 -> 12x12, 20 ch (a short last block)", 2, 20, 24, 24, 20, 3, 2, 1, 1, 1, 1, 1, 20, true, true},
      {"dw 3x3 stride 2, 14x14 -> 7x7, 44 ch", 1, 44, 14, 14, 44, 3, 2, 1, 1, 1, 1, 1, 44, true, false},
      {"dw 5x5 stride 2, 28x28 -> 14x14, 16 ch", 1, 16, 28, 28, 16, 5, 2, 2, 2, 2, 2, 1, 16, true, true},
      {"dw 5x5 stride 2, 13x13 -> 7x7, 24 ch, batch 3", 3, 24, 13, 13, 24, 5, 2, 2, 2, 2, 2, 1, 24, false, false},
      {"dw 3x3 stride 2 dilation 2, 18x18 -> 9x9, 8 ch", 2, 8, 18, 18, 8, 3, 2, 2, 2, 2, 2, 2, 8, true, true},
      {"dw 5x5, 7x7, 24 ch (stride 1: the depthwise kernel)", 3, 24, 7, 7, 24, 5, 1, 2, 2, 2, 2, 1, 24, false, false},
  };
  Rng rng;
  for (const Case& c : cases) {
    V x = rng.vec(size_t(c.n * c.C * c.H * c.W)), w = rng.vec(size_t(c.M * c.k * c.k)), b = rng.vec(size_t(c.M));
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int wi = pb.weight("w", {c.M, 1, c.k, c.k}, w);
    int bi = c.bias ? pb.weight("b", {c.M}, b) : -1;
    int yi = pb.output("y", {c.M, c.OH(), c.OW()});
    pb.op("Conv", {xi, wi, bi}, {yi}, conv_attrs(c, c.relu ? "relu" : "none"));
    const std::string path = conv_kernel_path(pb, 0);
    const bool grouped = memlane::cpu::grouped_blocked_takes_depthwise(c.OH(), c.OW(), c.s, c.s);
    CHECK_MSG(grouped == (path == "grouped_blocked_avx2") && path.rfind("no kernel", 0) != 0,
              std::string(c.label) + ": path '" + path + "'");
    const V want = reference(c, x, w, b);
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, c.n, {x}, threads);
      const std::string label = std::string(c.label) + " on " + path + ", " + std::to_string(threads) + " thread(s)";
      CHECK_MSG(r.status == Status::kOk, label + ": " + r.message);
      if (r.status != Status::kOk) continue;
      const float d = max_abs_diff(r.outputs[0], want);
      CHECK_MSG(d <= 2e-4f, label + ": max abs diff " + std::to_string(d));
    }
  }
}

// Conv -> activation folded into the grouped conv (applied in registers) against the two ops
// unfused on the other paths.
void test_fused_activations() {
  struct ActCase {
    const char* act;
    Attrs attrs;
    Case c;
  };
  const ActCase acts[] = {
      {"Relu", {}, {"8 ch a group -> Relu", 2, 32, 9, 9, 32, 3, 1, 1, 1, 1, 1, 1, 4, true, false}},
      {"Clip", {{"min", 0.0}, {"max", 6.0}}, {"16 ch a group s2 -> Clip", 2, 48, 14, 14, 48, 3, 2, 1, 1, 1, 1, 1, 3, true, false}},
      {"HardSwish", {}, {"24 ch a group -> HardSwish", 1, 48, 7, 7, 48, 3, 1, 1, 1, 1, 1, 1, 2, true, false}},
      {"SiLU", {}, {"4 ch a group 5x5 -> SiLU", 2, 16, 11, 11, 16, 5, 1, 2, 2, 2, 2, 1, 4, true, false}},
      // depthwise, strided to a small map (the AVX2 lanes without AVX-512: grouped_blocked_takes_depthwise)
      {"HardSwish", {}, {"dw 5x5 s2 to 8x8, 48 ch -> HardSwish", 1, 48, 16, 16, 48, 5, 2, 2, 2, 2, 2, 1, 48, true, false}},
      {"Clip", {{"min", 0.0}, {"max", 6.0}}, {"dw 3x3 s2 to 7x7, 40 ch -> Clip", 2, 40, 14, 14, 40, 3, 2, 1, 1, 1, 1, 1, 40, true, false}},
  };
  Rng rng;
  for (const ActCase& a : acts) {
    const Case& c = a.c;
    const int64_t Cg = c.C / c.g;
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int wi = pb.weight("w", {c.M, Cg, c.k, c.k}, rng.vec(size_t(c.M * Cg * c.k * c.k)));
    int bi = pb.weight("b", {c.M}, rng.vec(size_t(c.M)));
    int ci = pb.act("c", {c.M, c.OH(), c.OW()});
    int yi = pb.output("y", {c.M, c.OH(), c.OW()});
    pb.op("Conv", {xi, wi, bi}, {ci}, conv_attrs(c, "none"));
    pb.op(a.act, {ci}, {yi}, a.attrs);
    const V x = rng.vec(size_t(c.n * c.C * c.H * c.W));
    setenv("MEMLANE_NO_FUSION", "1", 1);
    const char* was = std::getenv("MEMLANE_CONV_NO_GROUPED");
    setenv("MEMLANE_CONV_NO_GROUPED", "1", 1);  // read at each build: the plain ops on the other paths
    RunResult plain = run_plan(pb, c.n, {x});
    if (!was) unsetenv("MEMLANE_CONV_NO_GROUPED");
    unsetenv("MEMLANE_NO_FUSION");
    for (int threads : {1, 2}) {
      RunResult fused = run_plan(pb, c.n, {x}, threads);
      const std::string label = std::string(c.label) + ", " + std::to_string(threads) + " thread(s)";
      CHECK_MSG(fused.status == Status::kOk && plain.status == Status::kOk, label + ": " + fused.message + plain.message);
      if (fused.status != Status::kOk || plain.status != Status::kOk) continue;
      const float d = max_abs_diff(fused.outputs[0], plain.outputs[0]);
      CHECK_MSG(d <= 2e-4f, label + ": max abs diff " + std::to_string(d));
    }
  }
}

// A depthwise conv whose fused activation writes over the conv's own input (the plan's arena
// puts the HardSwish output on the input's bytes). The per-channel depthwise kernel is safe in
// place; the grouped kernel (small maps without AVX-512) reads the taps' halo rows that another
// thread's row piece has already written, so make_conv gives it a copy of the input first. 48
// channels (6 blocks of 8) at 2 threads are split in row pieces: without the copy, mobilenet_v3's
// block drifted 1.2e-3 of its output scale from ORT (native-cnn-ops.test.ts).
void test_depthwise_in_place() {
  Rng rng;
  for (const int64_t side : {8, 14}) {
    const int64_t C = 48, n = 1;  // one sample: 6 blocks < 4 a thread, so rows are split too
    PlanBuilder pb;
    int xi = pb.input("x", {C, side, side});
    int wi = pb.weight("w", {C, 1, 5, 5}, rng.vec(size_t(C * 25)));
    int bi = pb.weight("b", {C}, rng.vec(size_t(C)));
    int ci = pb.act("c", {C, side, side});
    int yi = pb.output("y", {C, side, side});
    pb.tensors[size_t(yi)].offset = pb.tensors[size_t(xi)].offset;  // the activation over x
    pb.op("Conv", {xi, wi, bi}, {ci}, {{"kernel", S{5, 5}}, {"pads", S{2, 2, 2, 2}}, {"group", C}});
    pb.op("HardSwish", {ci}, {yi});
    const V x = rng.vec(size_t(n * C * side * side));
    setenv("MEMLANE_NO_FUSION", "1", 1);
    RunResult plain = run_plan(pb, n, {x});
    unsetenv("MEMLANE_NO_FUSION");
    const std::string label = "dw 5x5 on " + std::to_string(side) + "x" + std::to_string(side) + ", HardSwish over x";
    for (int threads : {1, 2}) {
      RunResult fused = run_plan(pb, n, {x}, threads);
      CHECK_MSG(fused.status == Status::kOk && plain.status == Status::kOk, label + ": " + fused.message + plain.message);
      if (fused.status != Status::kOk || plain.status != Status::kOk) continue;
      const float d = max_abs_diff(fused.outputs[0], plain.outputs[0]);
      CHECK_MSG(d <= 2e-4f, label + ", " + std::to_string(threads) + " thread(s): max abs diff " + std::to_string(d));
    }
  }
}

}  // namespace

int main() {
  if (expected_blocked_path().empty())
    std::printf("grouped_conv_test: blocked kernel off (neither AVX-512F nor an AVX2 build, or MEMLANE_CONV_NO_GROUPED / "
                "MEMLANE_CONV_GROUPED_NO_AVX2): the other paths run the cases\n");
  else
    std::printf("grouped_conv_test: the cases on %s\n", expected_blocked_path().c_str());
  test_against_reference();
  test_depthwise_small_maps();
  test_depthwise_in_place();
  test_fused_activations();
  return finish("grouped_conv_test");
}
