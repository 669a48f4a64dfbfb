// A residual block's last 1x1 conv (RegNet's f/c, ResNet-50's bottleneck end, MobileNet's
// projection) on the SIMD pointwise kernels with the Add (+ Relu) fused into their store
// (channels in lanes: simd::pw_lanes' R; pixels in lanes, maps over 32x32: run_pointwise_simd's
// scratch on AVX-512, sgemm_nn_rows_avx2's registers without it): x -> Conv1x1 + Relu (M -> C2) -> Conv1x1 + bias (C2 -> M) -> Add x [-> Relu].
// Checks that the Add and Relu are folded (the op profile has two kernels) where a kernel with
// the epilogue runs, and that the outputs equal the unfused ops' (MEMLANE_NO_FUSION=1): odd
// channel counts (partial 32-channel panels, a last panel of <= 16 and of 1 channel, partial
// 8-channel groups), odd maps (partial 8-pixel tiles, partial 512-column blocks), the residual
// on either side of the Add, the output written in place over the residual, batch 1/3/8, 1
// and 2 threads.
#include <cstdlib>
#include <string>

#include "cpu/conv_kernel.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/simd/avx512.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using S = std::vector<int64_t>;

namespace {

Attrs pw_attrs(const char* act) {
  return {{"kernel", S{1, 1}}, {"strides", S{1, 1}}, {"pads", S{0, 0, 0, 0}}, {"activation", std::string(act)}};
}

struct Case {
  int64_t M, C2, S;  // block channels, bottleneck channels, map side
};

}  // namespace

int main() {
  Rng rng;
  // Every case's second conv fits the lanes rule (M / ceil16(M) >= P / ceil16(P)).
  const Case cases[] = {
      {40, 37, 7},   // 49 pixels: 6 tiles + 1; panels 32 + 8
      {96, 64, 5},   // 25 pixels: 3 tiles + 1; three full panels
      {33, 24, 3},   // 9 pixels; a last panel of 1 channel
      {64, 40, 14},  // 196 pixels: 24 tiles + 4; AVX2: 8 panels of 24 + a 4-column dot-product tail
      // AVX2's dot-product tails of 1 and 2 columns (169 = 7 x 24 + 1, 122 -> a 1-pixel tail
      // after 5 panels at 11x11: 121 = 5 x 24 + 1), the second over K = 300
      {32, 40, 13},
      {20, 300, 11},
      // maps over 32x32: the pixels-in-lanes kernel (512-column blocks: 1600 = 3 x 512 + 64,
      // 1089 = 2 x 512 + 65)
      {24, 16, 40},
      {13, 20, 33},
      // the second conv's 300 input channels: K in two slices (AVX2), but where the residual is
      // the output itself (in place: one slice)
      {24, 300, 12},
  };
  // Maps of 128+ pixels: the pixels-in-lanes kernel, AVX-512's or AVX2's (simd/avx2_gemm.h);
  // smaller ones: the channels-in-lanes kernel with AVX-512, AVX2's pixels-in-lanes one
  // without (kPwSimdMinPAvx2).
  const bool on = !std::getenv("MEMLANE_CONV_PW_BLAS") && !std::getenv("MEMLANE_NO_FUSION");
  const bool avx512 = memlane::cpu::simd::have_avx512() && on;
  const bool avx2 = !memlane::cpu::simd::have_avx512() && memlane::cpu::simd::have_avx2_gemm() && on &&
                    !std::getenv("MEMLANE_CONV_PW_SIMD_MINP");
  const bool pixels = (avx512 || memlane::cpu::simd::have_avx2_gemm()) && on;
  const bool lanes = (avx512 && !std::getenv("MEMLANE_CONV_NO_PW_LANES")) || avx2;
  if (!lanes)
    std::printf("pw_residual_test: fusion count not checked on maps under 128 pixels (their kernel here has no "
                "residual epilogue, or fusion is switched off)%s\n", pixels ? "" : " nor on larger ones (no pointwise kernel)");
  for (const Case& k : cases)
    for (int variant = 0; variant < 8; ++variant) {
      const bool relu = variant & 1, resFirst = variant & 2, inPlace = variant & 4;
      PlanBuilder pb;
      int x = pb.input("x", {k.M, k.S, k.S});
      int w1 = pb.weight("w1", {k.C2, k.M, 1, 1}, rng.vec(size_t(k.C2 * k.M)));
      int w2 = pb.weight("w2", {k.M, k.C2, 1, 1}, rng.vec(size_t(k.M * k.C2)));
      int b2 = pb.weight("b2", {k.M}, rng.vec(size_t(k.M)));
      int a = pb.act("a", {k.C2, k.S, k.S});
      int c = pb.act("c", {k.M, k.S, k.S});
      int s = relu ? pb.act("s", {k.M, k.S, k.S}) : pb.output("s", {k.M, k.S, k.S});
      int y = relu ? pb.output("y", {k.M, k.S, k.S}) : s;
      if (inPlace) pb.tensors[size_t(y)].offset = pb.tensors[size_t(x)].offset;  // y over the residual
      pb.op("Conv", {x, w1, -1}, {a}, pw_attrs("relu"));
      pb.op("Conv", {a, w2, b2}, {c}, pw_attrs("none"));
      pb.op("Add", resFirst ? std::vector<int64_t>{x, c} : std::vector<int64_t>{c, x}, {s});
      if (relu) pb.op("Relu", {s}, {y});
      const std::string label = "M" + std::to_string(k.M) + " C2 " + std::to_string(k.C2) + " " + std::to_string(k.S) +
                                "x" + std::to_string(k.S) + (relu ? " relu" : "") + (resFirst ? " res-first" : "") +
                                (inPlace ? " in place" : "");
      for (int64_t batch : {1, 3, 8}) {
        const std::vector<float> in = rng.vec(size_t(batch * k.M * k.S * k.S));
        // Under 128 pixels AVX-512's channels-in-lanes kernel takes only the shapes whose 16-wide
        // padding wastes no more of M than of the pixels (pw_lanes_fit: 20 channels at 121 pixels
        // stay on sgemm, which has no epilogue); AVX2's pixels-in-lanes kernel takes them all.
        const bool small_fused = lanes && (!avx512 || memlane::cpu::conv_detail::pw_lanes_fit(k.M, k.S * k.S));
        if ((k.S * k.S >= 128 ? pixels : small_fused) && batch == 3)
          CHECK_MSG(built_kernels(pb, batch, in) == 2, label + ": the Add" + (relu ? " and Relu were" : " was") + " not fused");
        for (int threads : {1, 2}) {
          unsetenv("MEMLANE_NO_FUSION");
          RunResult fused = run_plan(pb, batch, {in}, threads);
          setenv("MEMLANE_NO_FUSION", "1", 1);
          RunResult plain = run_plan(pb, batch, {in}, threads);
          unsetenv("MEMLANE_NO_FUSION");
          CHECK_MSG(fused.status == memlane::Status::kOk && plain.status == memlane::Status::kOk,
                    fused.message + plain.message);
          const float d = max_abs_diff(fused.outputs.at(0), plain.outputs.at(0));
          CHECK_MSG(d <= 1e-5f, label + " batch " + std::to_string(batch) + " threads " + std::to_string(threads) +
                                    ": max abs diff " + std::to_string(d));
        }
      }
    }
  return finish("pw_residual_test");
}
