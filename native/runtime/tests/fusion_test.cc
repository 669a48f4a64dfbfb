// Conv -> Add(residual) [-> Relu] chains run as one Conv with a residual epilogue: the same
// outputs as the unfused ops (MEMLANE_NO_FUSION=1), on the Winograd and direct paths, with the
// residual on either side of the Add, written in place over the residual, and left unfused
// where the conv's output has another reader. Conv -> Relu/Clip/HardSwish/SiLU pairs likewise
// (activation_epilogue). Mul -> Add [-> Relu] per-channel chains (channel_affine.cc).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "depthwise_path.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using S = std::vector<int64_t>;

static Attrs conv_attrs(int64_t k, int64_t s, int64_t p, const char* act) {
  return {{"kernel", S{k, k}}, {"strides", S{s, s}}, {"pads", S{p, p, p, p}}, {"activation", std::string(act)}};
}

static void compare(const char* label, const PlanBuilder& pb, int64_t batch, const std::vector<float>& x,
                    int threads = 1) {
  unsetenv("MEMLANE_NO_FUSION");
  RunResult fused = run_plan(pb, batch, {x}, threads);
  setenv("MEMLANE_NO_FUSION", "1", 1);
  RunResult plain = run_plan(pb, batch, {x});
  unsetenv("MEMLANE_NO_FUSION");
  CHECK_MSG(fused.status == memlane::Status::kOk && plain.status == memlane::Status::kOk, fused.message + plain.message);
  // Relative to the outputs' scale: without AVX-512 a fused and an unfused conv can take
  // OpenBLAS products of other shapes (the input copy of an in-place conv), whose sums round
  // differently (the 64-channel 5x5 block: 2e-4 on outputs near 100).
  for (size_t i = 0; i < fused.outputs.size(); ++i) {
    float scale = 1.f;
    for (float v : plain.outputs[i]) scale = std::max(scale, std::fabs(v));
    const float d = max_abs_diff(fused.outputs[i], plain.outputs[i]);
    CHECK_MSG(d <= 1e-5f * scale, std::string(label) + ": max abs diff " + std::to_string(d) + " (outputs up to " + std::to_string(scale) + ")");
  }
}

// MatMul -> Add(bias) [-> Gelu] as one MatMul with an epilogue (gemm_epilogue.cc), on the
// AVX-512 and the OpenBLAS product (MEMLANE_GEMM_BLAS=1); N = 40 leaves a masked tail.
static void test_gemm_epilogue(Rng& rng) {
  for (int blas = 0; blas < 2; ++blas) {
    if (blas) setenv("MEMLANE_GEMM_BLAS", "1", 1);
    for (int variant = 0; variant < 3; ++variant) {  // 0: bias + Gelu, 1: bias + Gelu(tanh), 2: the Add's output is read again
      PlanBuilder pb;
      int x = pb.input("x", {5, 24});
      int w = pb.weight("w", {24, 40}, rng.vec(24 * 40));
      int b = pb.weight("b", {40}, rng.vec(40));
      int m = pb.act("m", {5, 40});
      int s = variant == 2 ? pb.output("s", {5, 40}) : pb.act("s", {5, 40});
      int y = pb.output("y", {5, 40});
      pb.op("MatMul", {x, w}, {m});
      pb.op("Add", {b, m}, {s});
      Attrs ga;
      if (variant == 1) ga = {{"approximate", std::string("tanh")}};
      pb.op("Gelu", {s}, {y}, ga);
      const std::string label = std::string(blas ? "blas " : "simd ") + "matmul+bias+gelu variant " + std::to_string(variant);
      compare(label.c_str(), pb, 3, rng.vec(3 * 5 * 24));
    }
    unsetenv("MEMLANE_GEMM_BLAS");
  }
}

// Whether the backend would fuse the Mul at ops[0] with what follows (channel_affine.cc).
static bool affine_fuses(const PlanBuilder& pb, int* skip) {
  std::vector<uint8_t> bytes = pb.build();
  memlane::Plan plan;
  std::string msg;
  if (memlane::parse_plan(bytes.data(), bytes.size(), &plan, &msg) != memlane::Status::kOk) return false;
  memlane::cpu::ChannelAffine a;
  const bool ok = memlane::cpu::channel_affine_chain(plan, 0, &a);
  *skip = a.skip;
  return ok;
}

// Mul(x, scale) -> Add(., shift) [-> Relu] with per-channel weights (an unfolded
// BatchNormalization, DenseNet's norm1 -> relu1) as one kernel: fused where it may be (weights
// [C, 1, 1] or [1, C, 1, 1] on either side, with and without the Relu, written over x), the
// same outputs as the three ops; not fused where a value in between is read elsewhere or a
// weight is not per channel.
static void test_channel_affine(Rng& rng) {
  const int64_t C = 24, H = 9, W = 11;
  struct Case {
    const char* label;
    S wshape;      // the scale's and shift's shape
    bool relu, weights_first, in_place, mid_read, fuses;
  };
  for (const Case& c : {Case{"affine [C,1,1] + relu", {C, 1, 1}, true, false, false, false, true},
                        Case{"affine [1,C,1,1], weights first", {1, C, 1, 1}, false, true, false, false, true},
                        Case{"affine + relu over x", {C, 1, 1}, true, false, true, false, true},
                        Case{"affine, the Mul's output read again", {C, 1, 1}, true, false, false, true, false},
                        Case{"affine, weights per column (not per channel)", {1, 1, W}, true, false, false, false, false}}) {
    PlanBuilder pb;
    const int64_t nw = c.wshape[0] * c.wshape[1] * c.wshape[2] * (c.wshape.size() > 3 ? c.wshape[3] : 1);
    int x = pb.input("x", {C, H, W});
    int sc = pb.weight("scale", c.wshape, rng.vec(size_t(nw)));
    int sh = pb.weight("shift", c.wshape, rng.vec(size_t(nw)));
    int m = c.mid_read ? pb.output("m", {C, H, W}) : pb.act("m", {C, H, W});
    int a = c.relu ? pb.act("a", {C, H, W}) : pb.output("a", {C, H, W});
    int y = c.relu ? pb.output("y", {C, H, W}) : a;
    if (c.in_place) pb.tensors[size_t(y)].offset = pb.tensors[size_t(x)].offset;
    pb.op("Mul", c.weights_first ? S{sc, x} : S{x, sc}, {m});
    pb.op("Add", c.weights_first ? S{sh, m} : S{m, sh}, {a});
    if (c.relu) pb.op("Relu", {a}, {y});
    int skip = -1;
    const bool fused = affine_fuses(pb, &skip);
    CHECK_MSG(fused == c.fuses, std::string(c.label) + ": fused " + std::to_string(fused));
    if (fused) CHECK_MSG(skip == (c.relu ? 2 : 1), std::string(c.label) + ": skip " + std::to_string(skip));
    for (int threads : {1, 2}) compare(c.label, pb, 3, rng.vec(size_t(3 * C * H * W)), threads);
  }
}

int main() {
  Rng rng;
  test_channel_affine(rng);
  // Basic block: conv+relu, conv, add input, relu (Winograd-sized maps, 16 channels: 32x32
  // in whole 16-tile rows, 28x28 and 56x56 in masked segments of 14 and 16 + 12 tiles, 14x14
  // two 7-tile rows a segment; odd maps 55, 27 and 13 in segments of ceil(S / 2) tiles).
  for (int64_t S : {32, 28, 56, 14, 55, 27, 13})
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      PlanBuilder pb;
      int x = pb.input("x", {16, S, S});
      int w1 = pb.weight("w1", {16, 16, 3, 3}, rng.vec(16 * 16 * 9));
      int w2 = pb.weight("w2", {16, 16, 3, 3}, rng.vec(16 * 16 * 9));
      int b2 = pb.weight("b2", {16}, rng.vec(16));
      int a = pb.act("a", {16, S, S});
      int c = pb.act("c", {16, S, S});
      int s = pb.act("s", {16, S, S});
      int y = pb.output("y", {16, S, S});
      if (inPlace) pb.tensors[size_t(y)].offset = pb.tensors[size_t(x)].offset;  // y over the residual
      pb.op("Conv", {x, w1, -1}, {a}, conv_attrs(3, 1, 1, "relu"));
      pb.op("Conv", {a, w2, b2}, {c}, conv_attrs(3, 1, 1, "none"));
      pb.op("Add", {c, x}, {s});
      pb.op("Relu", {s}, {y});
      const std::string label = std::string(inPlace ? "winograd block, in place, " : "winograd block, ") +
                                std::to_string(S) + "x" + std::to_string(S);
      for (int threads : {1, 2}) compare(label.c_str(), pb, 3, rng.vec(size_t(3 * 16 * S * S)), threads);
    }
  // Downsampling block: stride-2 direct conv, 1x1 projection on the Add's left, no Relu.
  {
    PlanBuilder pb;
    int x = pb.input("x", {16, 32, 32});
    int w1 = pb.weight("w1", {32, 16, 3, 3}, rng.vec(32 * 16 * 9));
    int wd = pb.weight("wd", {32, 16, 1, 1}, rng.vec(32 * 16));
    int r = pb.act("r", {32, 16, 16});
    int c = pb.act("c", {32, 16, 16});
    int y = pb.output("y", {32, 16, 16});
    pb.op("Conv", {x, wd, -1}, {r}, conv_attrs(1, 2, 0, "none"));
    pb.op("Conv", {x, w1, -1}, {c}, conv_attrs(3, 2, 1, "none"));
    pb.op("Add", {r, c}, {y});
    compare("stride-2 direct, residual first, no relu", pb, 2, rng.vec(2 * 16 * 32 * 32));
  }
  // The same block with the 1x1 stride-2 projection last: its gathered pointwise product takes
  // the residual Add and Relu, written over the residual (ResNet-50's first block of a stage).
  for (int64_t S : {32, 112}) {
    PlanBuilder pb;
    int x = pb.input("x", {16, S, S});
    int w1 = pb.weight("w1", {32, 16, 3, 3}, rng.vec(32 * 16 * 9));
    int wd = pb.weight("wd", {32, 16, 1, 1}, rng.vec(32 * 16));
    int bd = pb.weight("bd", {32}, rng.vec(32));
    int c = pb.act("c", {32, S / 2, S / 2});
    int r = pb.act("r", {32, S / 2, S / 2});
    int s = pb.act("s", {32, S / 2, S / 2});
    int y = pb.output("y", {32, S / 2, S / 2});
    pb.tensors[size_t(y)].offset = pb.tensors[size_t(c)].offset;
    pb.op("Conv", {x, w1, -1}, {c}, conv_attrs(3, 2, 1, "relu"));
    pb.op("Conv", {x, wd, bd}, {r}, conv_attrs(1, 2, 0, "none"));
    pb.op("Add", {r, c}, {s});
    pb.op("Relu", {s}, {y});
    const std::string label = "1x1 stride 2 (gathered) + residual + relu, in place, " + std::to_string(S) + "-wide";
    for (int threads : {1, 2}) compare(label.c_str(), pb, 2, rng.vec(size_t(2 * 16 * S * S)), threads);
  }
  // 8x8 maps (Winograd on pairs of samples, a lone last sample on the direct kernel).
  {
    PlanBuilder pb;
    int x = pb.input("x", {16, 8, 8});
    int w = pb.weight("w", {16, 16, 3, 3}, rng.vec(16 * 16 * 9));
    int c = pb.act("c", {16, 8, 8});
    int s = pb.act("s", {16, 8, 8});
    int y = pb.output("y", {16, 8, 8});
    pb.op("Conv", {x, w, -1}, {c}, conv_attrs(3, 1, 1, "none"));
    pb.op("Add", {x, c}, {s});
    pb.op("Relu", {s}, {y});
    compare("8x8 winograd pairs", pb, 5, rng.vec(5 * 16 * 8 * 8));
  }
  // conv + relu, conv, Add(residual x), Relu, written in place over x: the second conv fuses the
  // residual and Relu (it reads a, not x: a conv whose input is the residual its output
  // overwrites is not fused). 7x7 maps, 24 channels: the flattened-grid kernel; 64 channels,
  // 5x5: pixel rows, the residual and Relu in its transposing store.
  struct InPlaceBlock {
    const char* label;
    int64_t C, H, W, k;
  };
  for (const InPlaceBlock& ib : {InPlaceBlock{"7x7 flat grid, in place", 24, 7, 7, 3},
                                 InPlaceBlock{"5x5 pixel rows, in place", 64, 9, 11, 5}}) {
    PlanBuilder pb;
    const int64_t C = ib.C, taps = ib.k * ib.k;
    int x = pb.input("x", {C, ib.H, ib.W});
    int w1 = pb.weight("w1", {C, C, ib.k, ib.k}, rng.vec(size_t(C * C * taps)));
    int w = pb.weight("w", {C, C, ib.k, ib.k}, rng.vec(size_t(C * C * taps)));
    int b = pb.weight("b", {C}, rng.vec(size_t(C)));
    int a = pb.act("a", {C, ib.H, ib.W});
    int c = pb.act("c", {C, ib.H, ib.W});
    int s = pb.act("s", {C, ib.H, ib.W});
    int y = pb.output("y", {C, ib.H, ib.W});
    pb.tensors[size_t(y)].offset = pb.tensors[size_t(x)].offset;
    pb.op("Conv", {x, w1, -1}, {a}, conv_attrs(ib.k, 1, ib.k / 2, "relu"));
    pb.op("Conv", {a, w, b}, {c}, conv_attrs(ib.k, 1, ib.k / 2, "none"));
    pb.op("Add", {c, x}, {s});
    pb.op("Relu", {s}, {y});
    for (int threads : {1, 2}) compare(ib.label, pb, 3, rng.vec(size_t(3 * C * ib.H * ib.W)), threads);
  }
  // The conv's output is also a graph output: no fusion, same results.
  {
    PlanBuilder pb;
    int x = pb.input("x", {8, 16, 16});
    int w = pb.weight("w", {8, 8, 3, 3}, rng.vec(8 * 8 * 9));
    int c = pb.output("c", {8, 16, 16});
    int y = pb.output("y", {8, 16, 16});
    pb.op("Conv", {x, w, -1}, {c}, conv_attrs(3, 1, 1, "none"));
    pb.op("Add", {c, x}, {y});
    compare("conv output read elsewhere", pb, 2, rng.vec(2 * 8 * 16 * 16));
  }
  // Conv -> activation pairs fold into the Conv on every path: depthwise (stride 1 and 2),
  // pointwise sgemm, direct / Winograd 3x3 and the im2col fallback (12-wide maps).
  struct ActCase {
    const char* label;
    const char* act;
    Attrs attrs;
    int64_t C, M, H, k, s, g;
  };
  const ActCase acts[] = {
      {"depthwise 3x3 -> Clip(0,6)", "Clip", {{"min", 0.0}, {"max", 6.0}}, 8, 8, 19, 3, 1, 8},
      {"depthwise 5x5 s2 -> SiLU", "SiLU", {}, 6, 6, 23, 5, 2, 6},
      {"depthwise blocked 3x3 20 ch -> SiLU", "SiLU", {}, 20, 20, 30, 3, 1, 20},
      {"depthwise blocked 5x5 s2 37 ch -> HardSwish", "HardSwish", {}, 37, 37, 29, 5, 2, 37},
      {"depthwise blocked 3x3 s2 17 ch -> Clip", "Clip", {{"min", -0.5}, {"max", 0.5}}, 17, 17, 57, 3, 2, 17},
      {"depthwise blocked 3x3 7x7 maps 40 ch -> Relu", "Relu", {}, 40, 40, 7, 3, 1, 40},
      {"pointwise -> HardSwish", "HardSwish", {}, 8, 12, 9, 1, 1, 1},
      {"pointwise -> SiLU", "SiLU", {}, 8, 12, 17, 1, 1, 1},
      {"pointwise simd 13x13 -> Clip", "Clip", {{"min", 0.0}, {"max", 6.0}}, 5, 11, 13, 1, 1, 1},
      // pixels-in-lanes pointwise (the AVX2 kernel takes every activation in registers): odd
      // channel counts (partial 4-row blocks), 225 = 9 x 24 + 9 and 529 = 512 + 17 columns
      {"pointwise simd 12x12, 13 channels -> HardSwish", "HardSwish", {}, 7, 13, 12, 1, 1, 1},
      {"pointwise simd 15x15, 6 channels -> Relu", "Relu", {}, 9, 6, 15, 1, 1, 1},
      {"pointwise simd 23x23, 5 channels -> SiLU", "SiLU", {}, 3, 5, 23, 1, 1, 1},
      {"3x3 direct/winograd -> Clip", "Clip", {{"min", -0.5}, {"max", 0.5}}, 8, 16, 16, 3, 1, 1},
      {"3x3 im2col 12-wide -> HardSwish", "HardSwish", {}, 4, 6, 12, 3, 1, 1},
      {"3x3 stride 2 -> Relu", "Relu", {}, 4, 8, 32, 3, 2, 1},
      // the activation in registers: channels-in-lanes pointwise (maps up to 64 pixels; odd
      // channel counts leave partial panels and 8-channel groups, odd maps partial pixel
      // tiles) and the direct kernel's store (stems: 3 channels, stride 2)
      {"pointwise lanes 7x7 -> SiLU", "SiLU", {}, 20, 40, 7, 1, 1, 1},
      {"pointwise lanes 5x5, 13 channels -> HardSwish", "HardSwish", {}, 9, 13, 5, 1, 1, 1},
      {"pointwise lanes 3x3, 5 channels -> Clip", "Clip", {{"min", -0.3}, {"max", 0.4}}, 7, 5, 3, 1, 1, 1},
      {"pointwise lanes 6x6 -> Relu", "Relu", {}, 33, 64, 6, 1, 1, 1},
      {"3x3 stride 2 stem -> SiLU", "SiLU", {}, 3, 32, 32, 3, 2, 1},
      {"3x3 stride 2 stem -> Clip(0,6)", "Clip", {{"min", 0.0}, {"max", 6.0}}, 3, 16, 30, 3, 2, 1},
      {"3x3 direct stride 1 -> HardSwish", "HardSwish", {}, 5, 12, 20, 3, 1, 1},
      {"pixel rows 3x3 stride 2, 72 channels -> SiLU", "SiLU", {}, 8, 72, 19, 3, 2, 1},  // 72 taps: not a stem
      {"pixel rows 5x5, 64 channels -> Relu", "Relu", {}, 4, 64, 12, 5, 1, 1},
  };
  for (const auto& a : acts) {
    PlanBuilder pb;
    const int64_t p = a.k / 2, OH = (a.H + 2 * p - a.k) / a.s + 1;
    int x = pb.input("x", {a.C, a.H, a.H});
    int w = pb.weight("w", {a.M, a.C / a.g, a.k, a.k}, rng.vec(size_t(a.M * (a.C / a.g) * a.k * a.k)));
    int b = pb.weight("b", {a.M}, rng.vec(size_t(a.M)));
    int c = pb.act("c", {a.M, OH, OH});
    int y = pb.output("y", {a.M, OH, OH});
    Attrs ca = conv_attrs(a.k, a.s, p, "none");
    ca.push_back({"group", a.g});
    pb.op("Conv", {x, w, b}, {c}, ca);
    pb.op(a.act, {c}, {y}, a.attrs);
    for (int threads : {1, 2}) compare(a.label, pb, 3, rng.vec(size_t(3 * a.C * a.H * a.H)), threads);
  }
  // The planner gives the activation's output the conv input's bytes (the input dies at the
  // conv): the depthwise kernel folds in place; a pointwise conv (M == C) must not (it reads
  // every input channel for each output channel), nor a strided depthwise one (smaller output).
  struct OverCase {
    const char* label;
    int64_t C, H, k, s, g;
  };
  const OverCase overs[] = {
      {"depthwise 3x3 in place -> HardSwish", 8, 15, 3, 1, 8},
      // the blocked kernel's bands (next band packed before this one is unpacked), 2 blocks
      {"depthwise 5x5 in place, 60x60 in bands -> HardSwish", 20, 60, 5, 1, 20},
      {"depthwise 3x3 in place, 7x7 maps -> HardSwish", 33, 7, 3, 1, 33},
      // 7x7 pad 3 on a 160-wide map: the scratch budget allows one output row a band, but band
      // 1's unpack would overwrite rows that band 3 has yet to pack: inplace_safe_band raises it
      {"depthwise 7x7 in place, 160-wide, band raised -> HardSwish", 16, 160, 7, 1, 16},
      {"pointwise over its input -> HardSwish", 24, 15, 1, 1, 1},
  };
  for (const auto& o : overs) {
    PlanBuilder pb;
    const int64_t p = o.k / 2, OH = (o.H + 2 * p - o.k) / o.s + 1;
    int x = pb.input("x", {o.C, o.H, o.H});
    int a = pb.act("a", {o.C, o.H, o.H});
    int c = pb.act("c", {o.C, OH, OH});
    int y = pb.output("y", {o.C, OH, OH});
    pb.tensors[size_t(y)].offset = pb.tensors[size_t(a)].offset;  // y exactly over a
    pb.op("Relu", {x}, {a});
    Attrs ca = conv_attrs(o.k, o.s, p, "none");
    ca.push_back({"group", o.g});
    pb.op("Conv", {a, pb.weight("w", {o.C, o.C / o.g, o.k, o.k}, rng.vec(size_t(o.C * (o.C / o.g) * o.k * o.k))),
                   pb.weight("b", {o.C}, rng.vec(size_t(o.C)))},
          {c}, ca);
    pb.op("HardSwish", {c}, {y});
    for (int threads : {1, 2}) compare(o.label, pb, 3, rng.vec(size_t(3 * o.C * o.H * o.H)), threads);
  }
  // The activation's output over part of the conv's input and beyond (an expansion conv whose
  // input dies at the conv): every non-depthwise path copies the input first (copy_input).
  struct PartCase {
    const char* label;
    int64_t C, M, H, k, s, shift;  // shift: floats from the input's start to the output's
  };
  const PartCase parts[] = {
      {"pointwise simd expand, output over the input's tail -> Clip", 8, 24, 15, 1, 1, 16},
      {"pointwise 7x7 expand, output over the input's tail -> Clip", 8, 32, 7, 1, 1, 32},
      {"3x3 stride 2 (im2col), output from the input's start -> Clip", 3, 16, 20, 3, 2, 0},
      {"3x3 stride 2 (im2col) 16 -> 64, output over the input's tail -> Clip", 16, 64, 20, 3, 2, 16},
      {"3x3 stride 1 (direct), output over the input's tail -> Clip", 8, 16, 16, 3, 1, 48},
      {"pointwise stride 2 (gathered) expand, output from the input's start -> Clip", 8, 32, 16, 1, 2, 0},
  };
  for (const auto& o : parts) {
    PlanBuilder pb;
    const int64_t p = o.k / 2, OH = (o.H + 2 * p - o.k) / o.s + 1;
    int x = pb.input("x", {o.C, o.H, o.H});
    int c = pb.act("c", {o.M, OH, OH});
    int a = pb.act("a", {o.C, o.H, o.H});
    int y = pb.output("y", {o.M, OH, OH});
    auto& Y = pb.tensors[size_t(y)];
    Y.offset = pb.tensors[size_t(a)].offset + o.shift * 4;
    pb.arena_cursor = std::max(pb.arena_cursor, (Y.offset + Y.bytes + 63) / 64 * 64);
    pb.op("Relu", {x}, {a});
    pb.op("Conv", {a, pb.weight("w", {o.M, o.C, o.k, o.k}, rng.vec(size_t(o.M * o.C * o.k * o.k))),
                   pb.weight("b", {o.M}, rng.vec(size_t(o.M)))},
          {c}, conv_attrs(o.k, o.s, p, "none"));
    pb.op("Clip", {c}, {y}, {{"min", 0.0}, {"max", 6.0}});
    for (int threads : {1, 2}) compare(o.label, pb, 3, rng.vec(size_t(3 * o.C * o.H * o.H)), threads);
  }
  test_gemm_epilogue(rng);
  check_depthwise_path();
  return finish("fusion_test");
}
