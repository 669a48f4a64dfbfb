// The 1x1 Conv -> depthwise Conv pair run as one kernel (cpu/conv_pw_dw.h): the same outputs as
// the two convs apart (MEMLANE_CONV_NO_PW_DW=1), for every way the plan writes the 1x1 conv's
// activation (the op's own Relu, a Relu / Clip / HardSwish / SiLU op after it, none) and the
// depthwise conv's likewise; channel counts that leave a partial 16-channel block and a partial
// group of blocks; 3x3 and 5x5 taps, strides 1 and 2, dilation 2, asymmetric pads; maps wide
// enough for many bands (the rows two bands share carried over) and narrow ones; batch 1 and
// 3, 1 and 2 threads (row pieces that each start a band afresh). And where the pair must run
// apart: the 1x1 output read elsewhere, the depthwise output over the 1x1 conv's input.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cpu/cpu_features.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using S = std::vector<int64_t>;

namespace {

Attrs conv_attrs(S k, S s, S pads, S dil, int64_t group, const char* act) {
  return {{"kernel", k}, {"strides", s}, {"pads", pads}, {"dilations", dil}, {"group", group}, {"activation", std::string(act)}};
}

// One activation way: 0 none, 1 the conv's own Relu, 2.. an op after it.
const char* const kActOps[] = {"", "", "Relu", "Clip", "HardSwish", "SiLU"};

struct Case {
  int64_t cin, C, H, W, k, s, d, pt, pl, pb, pr;
};

// x -> Conv 1x1 (cin -> C) [act] -> depthwise Conv [act] -> y. Returns the builder; *x_id etc.
PlanBuilder chain(const Case& c, int pw_act, int dw_act, Rng& rng, bool t_is_output, bool y_over_x) {
  PlanBuilder pb;
  const int64_t OH = (c.H + c.pt + c.pb - c.d * (c.k - 1) - 1) / c.s + 1;
  const int64_t OW = (c.W + c.pl + c.pr - c.d * (c.k - 1) - 1) / c.s + 1;
  const int x = pb.input("x", {c.cin, c.H, c.W});
  const int wp = pb.weight("wp", {c.C, c.cin, 1, 1}, rng.vec(size_t(c.C * c.cin)));
  const int bp = pb.weight("bp", {c.C}, rng.vec(size_t(c.C)));
  const int wd = pb.weight("wd", {c.C, 1, c.k, c.k}, rng.vec(size_t(c.C * c.k * c.k)));
  const int bd = pb.weight("bd", {c.C}, rng.vec(size_t(c.C)));
  int t = t_is_output ? pb.output("t", {c.C, c.H, c.W}) : pb.act("t", {c.C, c.H, c.W});
  pb.op("Conv", {x, wp, bp}, {t}, conv_attrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, pw_act == 1 ? "relu" : "none"));
  if (pw_act >= 2) {
    const int ta = pb.act("ta", {c.C, c.H, c.W});
    Attrs a;
    if (std::string(kActOps[pw_act]) == "Clip") a = {{"min", 0.0}, {"max", 6.0}};
    pb.op(kActOps[pw_act], {t}, {ta}, a);
    t = ta;
  }
  const Attrs da = conv_attrs({c.k, c.k}, {c.s, c.s}, {c.pt, c.pl, c.pb, c.pr}, {c.d, c.d}, c.C, dw_act == 1 ? "relu" : "none");
  if (dw_act >= 2) {
    const int u = pb.act("u", {c.C, OH, OW});
    pb.op("Conv", {t, wd, bd}, {u}, da);
    const int y = pb.output("y", {c.C, OH, OW});
    Attrs a;
    if (std::string(kActOps[dw_act]) == "Clip") a = {{"min", -0.5}, {"max", 0.5}};
    pb.op(kActOps[dw_act], {u}, {y}, a);
  } else {
    pb.op("Conv", {t, wd, bd}, {pb.output("y", {c.C, OH, OW})}, da);
  }
  if (y_over_x) pb.tensors[size_t(pb.outputs.back())].offset = pb.tensors[size_t(x)].offset;
  return pb;
}

std::string label(const Case& c, int pa, int da) {
  return "cin " + std::to_string(c.cin) + " C " + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " k" + std::to_string(c.k) + " s" + std::to_string(c.s) + " d" + std::to_string(c.d) +
         " act " + std::to_string(pa) + "/" + std::to_string(da);
}

// Fused against apart, every batch and thread count, relative to the outputs' scale (at least 1:
// a clipped output hides the larger sums the two orders round differently).
void compare(const PlanBuilder& pb, const std::string& what, int64_t cin_hw, Rng& rng) {
  for (int64_t batch : {1, 3}) {
    const std::vector<float> x = rng.vec(size_t(batch * cin_hw));
    for (int threads : {1, 2}) {
      setenv("MEMLANE_CONV_PW_DW", "1", 1);
      RunResult fused = run_plan(pb, batch, {x}, threads);
      unsetenv("MEMLANE_CONV_PW_DW");
      setenv("MEMLANE_CONV_NO_PW_DW", "1", 1);
      RunResult apart = run_plan(pb, batch, {x}, threads);
      unsetenv("MEMLANE_CONV_NO_PW_DW");
      CHECK_MSG(fused.status == memlane::Status::kOk && apart.status == memlane::Status::kOk, fused.message + apart.message);
      if (fused.status != memlane::Status::kOk || apart.status != memlane::Status::kOk) continue;
      for (size_t o = 0; o < apart.outputs.size(); ++o) {
        float scale = 1.f;
        for (float v : apart.outputs[o]) scale = std::max(scale, std::abs(v));
        const float d = max_abs_diff(fused.outputs[o], apart.outputs[o]);
        CHECK_MSG(d <= 1e-5f * scale, what + " batch " + std::to_string(batch) + " threads " + std::to_string(threads) +
                                          ": max abs diff " + std::to_string(d) + " (scale " + std::to_string(scale) + ")");
      }
    }
  }
}

}  // namespace

int main() {
  Rng rng;
  const bool avx512 = memlane::cpu::use_avx512f();
  const Case cases[] = {
      {16, 48, 56, 56, 3, 1, 1, 1, 1, 1, 1},      // MobileNet's expand at 56 px: 3 blocks, one group
      {16, 48, 112, 112, 3, 2, 1, 0, 0, 1, 1},    // stride 2 with torch-style asymmetric pads: many bands
      {3, 100, 23, 31, 5, 1, 1, 2, 2, 2, 2},      // 5x5; 7 blocks: a group of 4 and one of 3 (last partial)
      {24, 33, 17, 13, 3, 2, 1, 1, 1, 1, 1},      // 3 blocks, the last of 1 channel; odd map, stride 2
      {1, 16, 40, 70, 3, 1, 2, 2, 2, 2, 2},       // dilation 2 (bands share 4 rows); one input channel
      {40, 24, 9, 9, 5, 2, 1, 2, 2, 2, 2},        // a small map: one band
  };
  for (const Case& c : cases)
    for (int pa = 0; pa < 6; ++pa)
      for (int da : {0, 1, 3, 5}) {
        if (pa > 1 && pa != 2 + (da + c.C) % 4 && !(c.C == 48 && c.H == 56)) continue;  // every pair on the first case only
        PlanBuilder pb = chain(c, pa, da, rng, false, false);
        const std::string what = label(c, pa, da);
        if (avx512) {
          setenv("MEMLANE_CONV_PW_DW", "1", 1);
          const size_t fused = built_kernels(pb, 1, rng.vec(size_t(c.cin * c.H * c.W)));
          unsetenv("MEMLANE_CONV_PW_DW");
          CHECK_MSG(fused == 1, what + ": " + std::to_string(fused) + " kernels, expected the pair fused into 1");
        }
        compare(pb, what, c.cin * c.H * c.W, rng);
      }
  // Where the pair must run apart: still correct, and two kernels.
  const Case c = cases[0];
  for (int variant = 0; variant < 2; ++variant) {
    PlanBuilder pb = chain(c, 1, 1, rng, variant == 0, variant == 1);
    const std::string what = variant == 0 ? "1x1 output also a graph output" : "depthwise output over the 1x1 input";
    setenv("MEMLANE_CONV_PW_DW", "1", 1);
    CHECK_MSG(built_kernels(pb, 1, rng.vec(size_t(c.cin * c.H * c.W))) == 2, what + ": fused, expected apart");
    unsetenv("MEMLANE_CONV_PW_DW");
    if (variant == 0) compare(pb, what, c.cin * c.H * c.W, rng);
  }
  if (!avx512) std::printf("pw_dw_test: no AVX-512 here: the pair runs apart; fused kernel not exercised\n");
  return finish("pw_dw_test");
}
