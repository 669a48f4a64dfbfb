#include "test_plans.h"

#include <cfloat>
#include <cstdint>

namespace cudatest {
namespace {

using mltest::Attrs;
using mltest::PlanBuilder;
using V = std::vector<int64_t>;

std::vector<float> rnd(size_t n, uint64_t seed, float scale = 0.5f) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (auto& x : v) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    x = scale * (float((s >> 40) & 0xffffff) / float(1 << 23) - 1.f);
  }
  return v;
}
size_t count(const V& s) { size_t n = 1; for (auto d : s) n *= size_t(d); return n; }
int64_t conv_out(int64_t in, int k, int s, int p0, int p1, int d) { return (in + p0 + p1 - d * (k - 1) - 1) / s + 1; }

NamedPlan conv(const std::string& name, int64_t C, int64_t H, int64_t M, int k, int s, int p, int d, int g,
               bool bias, bool relu) {
  NamedPlan np{name, {}};
  PlanBuilder& b = np.plan;
  int x = b.input("x", {C, H, H});
  int w = b.weight("w", {M, C / g, k, k}, rnd(count({M, C / g, k, k}), 11));
  int bi = bias ? b.weight("b", {M}, rnd(size_t(M), 12)) : -1;
  int64_t OH = conv_out(H, k, s, p, p, d);
  int y = b.output("y", {M, OH, OH});
  b.op("Conv", {x, w, bi}, {y},
       Attrs{{"kernel", V{k, k}}, {"strides", V{s, s}}, {"pads", V{p, p, p, p}}, {"dilations", V{d, d}},
             {"group", int64_t(g)}, {"activation", std::string(relu ? "relu" : "none")}});
  return np;
}

// ConvTranspose with the plan's weight layout [g, M/g, k, k, C/g]; pb is the end pad (output
// padding already taken off it, so it may be negative).
NamedPlan conv_transpose(const std::string& name, int64_t C, int64_t H, int64_t M, int k, int s, int p, int pb, int d,
                         int g, bool bias) {
  NamedPlan np{name, {}};
  PlanBuilder& b = np.plan;
  int x = b.input("x", {C, H, H});
  int w = b.weight("w", {g, M / g, k, k, C / g}, rnd(count({M, C / g, k, k}), 13));
  int bi = bias ? b.weight("b", {M}, rnd(size_t(M), 14)) : -1;
  const int64_t OH = (H - 1) * s + int64_t(d) * (k - 1) + 1 - p - pb;
  int y = b.output("y", {M, OH, OH});
  b.op("ConvTranspose", {x, w, bi}, {y},
       Attrs{{"kernel", V{k, k}}, {"strides", V{s, s}}, {"pads", V{p, p, pb, pb}}, {"dilations", V{d, d}},
             {"group", int64_t(g)}});
  return np;
}

NamedPlan unary(const std::string& op, Attrs attrs = {}) {
  NamedPlan np{op, {}};
  int x = np.plan.input("x", {3, 5, 7});
  int y = np.plan.output("y", {3, 5, 7});
  np.plan.op(op, {x}, {y}, std::move(attrs));
  return np;
}

NamedPlan pool(const std::string& name, const std::string& op, int k, int s, int pt, int pb, bool ceil, bool cip) {
  NamedPlan np{name, {}};
  const int64_t H = 9;
  auto out = [&](int64_t in) {
    int64_t num = in + pt + pb - k;
    int64_t o = (ceil ? (num + s - 1) / s : num / s) + 1;
    if (ceil && (o - 1) * s >= in + pt) --o;  // the last window must start inside input + left pad
    return o;
  };
  int x = np.plan.input("x", {4, H, H});
  int y = np.plan.output("y", {4, out(H), out(H)});
  Attrs a{{"kernel", V{k, k}}, {"strides", V{s, s}}, {"pads", V{pt, pt, pb, pb}}, {"ceilMode", ceil}};
  if (op == "MaxPool") a.push_back({"dilations", V{1, 1}});
  else a.push_back({"countIncludePad", cip});
  np.plan.op(op, {x}, {y}, a);
  return np;
}

// Any 2-D conv: per-axis kernel/stride/dilation and the four pads [top, left, bottom, right].
NamedPlan conv2(const std::string& name, int64_t C, int64_t H, int64_t W, int64_t M, V k, V s, V pads, V d, int g,
                bool bias, bool relu, uint64_t seed = 51) {
  NamedPlan np{name, {}};
  PlanBuilder& b = np.plan;
  int x = b.input("x", {C, H, W});
  int w = b.weight("w", {M, C / g, k[0], k[1]}, rnd(count({M, C / g, k[0], k[1]}), seed));
  int bi = bias ? b.weight("b", {M}, rnd(size_t(M), seed + 1)) : -1;
  const int64_t OH = conv_out(H, int(k[0]), int(s[0]), int(pads[0]), int(pads[2]), int(d[0]));
  const int64_t OW = conv_out(W, int(k[1]), int(s[1]), int(pads[1]), int(pads[3]), int(d[1]));
  int y = b.output("y", {M, OH, OW});
  b.op("Conv", {x, w, bi}, {y},
       Attrs{{"kernel", k}, {"strides", s}, {"pads", pads}, {"dilations", d}, {"group", int64_t(g)},
             {"activation", std::string(relu ? "relu" : "none")}});
  return np;
}

// Any 2-D pool: per-axis kernel/stride, the four pads, dilations (MaxPool), ceil, count_include_pad.
NamedPlan pool2(const std::string& name, const std::string& op, int64_t C, int64_t H, int64_t W, V k, V s, V pads,
                V d, bool ceil, bool cip) {
  NamedPlan np{name, {}};
  auto out = [&](int64_t in, int64_t kk, int64_t ss, int64_t p0, int64_t p1, int64_t dd) {
    const int64_t span = in + p0 + p1 - (dd * (kk - 1) + 1);
    int64_t o = (ceil ? (span + ss - 1) / ss : span / ss) + 1;
    if (ceil && (o - 1) * ss >= in + p0) --o;
    return o;
  };
  const bool mx = op == "MaxPool";
  int x = np.plan.input("x", {C, H, W});
  int y = np.plan.output("y", {C, out(H, k[0], s[0], pads[0], pads[2], mx ? d[0] : 1),
                               out(W, k[1], s[1], pads[1], pads[3], mx ? d[1] : 1)});
  Attrs a{{"kernel", k}, {"strides", s}, {"pads", pads}, {"ceilMode", ceil}};
  if (mx) a.push_back({"dilations", d});
  else a.push_back({"countIncludePad", cip});
  np.plan.op(op, {x}, {y}, a);
  return np;
}

// y = a (op) b for a binary op; a weight side is given by its shape and data, an activation
// side by its per-sample shape (wa/wb say which is the weight).
NamedPlan binary(const std::string& name, const std::string& op, V sa, bool wa, V sb, bool wb, V sy, uint64_t seed,
                 float shift = 0.f) {
  NamedPlan np{name, {}};
  auto& b = np.plan;
  auto side = [&](const char* n, const V& shape, bool weight, uint64_t sd) {
    if (!weight) return b.input(n, shape);
    std::vector<float> v = rnd(count(shape), sd);
    for (auto& f : v) f += shift;  // divisors away from 0
    return b.weight(n, shape, v);
  };
  int x = side("a", sa, wa, seed);
  int z = side("b", sb, wb, seed + 1);
  int y = b.output("y", sy);
  b.op(op, {x, z}, {y});
  return np;
}

// Clip, HardSigmoid, HardSwish, SiLU, Pad (3 modes), Split, Concat with a weight, LSTM.
std::vector<NamedPlan> cnn_op_plans() {
  std::vector<NamedPlan> v;
  v.push_back(unary("Clip", Attrs{{"min", 0.0}, {"max", 0.25}}));
  v.push_back(unary("HardSigmoid", Attrs{{"alpha", 2.0}, {"beta", 0.5}}));
  v.push_back(unary("HardSwish"));
  v.push_back(unary("SiLU"));
  for (const char* mode : {"constant", "reflect", "edge"}) {
    NamedPlan np{std::string("Pad ") + mode + " [n,3,5,7] crop and pad", {}};
    int x = np.plan.input("x", {3, 5, 7});
    int y = np.plan.output("y", {4, 7, 8});
    np.plan.op("Pad", {x}, {y}, Attrs{{"pads", V{0, 1, 2, 0, 0, 0, 0, 1}}, {"mode", std::string(mode)}, {"value", 0.25}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Split axis 2 into 1 + 4 + 2", {}};
    int x = np.plan.input("x", {3, 7, 5});
    int a = np.plan.output("a", {3, 1, 5}), b = np.plan.output("b", {3, 4, 5}), c = np.plan.output("c", {3, 2, 5});
    np.plan.op("Split", {x}, {a, b, c}, Attrs{{"axis", int64_t(2)}, {"split", V{1, 4, 2}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat weight [1,1,6] + activation axis 1", {}};
    int w = np.plan.weight("tok", {1, 1, 6}, rnd(6, 71));
    int x = np.plan.input("x", {4, 6});
    int y = np.plan.output("y", {5, 6});
    np.plan.op("Concat", {w, x}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    const int64_t D = std::string(dir) == "bidirectional" ? 2 : 1, S = 6, I = 5, H = 8;
    NamedPlan np{std::string("LSTM ") + dir, {}};
    PlanBuilder& b = np.plan;
    int x = b.input("x", {S, I});
    int w = b.weight("W", {D, 4 * H, I}, rnd(size_t(D * 4 * H * I), 81));
    int r = b.weight("R", {D, 4 * H, H}, rnd(size_t(D * 4 * H * H), 82));
    int bias = b.weight("B", {D, 8 * H}, rnd(size_t(D * 8 * H), 83));
    int y = b.output("y", {S, D, H}), yh = b.output("yh", {D, H}), yc = b.output("yc", {D, H});
    b.op("LSTM", {x, w, r, bias}, {y, yh, yc}, Attrs{{"hiddenSize", H}, {"direction", std::string(dir)}, {"layout", int64_t(1)}});
    v.push_back(std::move(np));
  }
  return v;
}

}  // namespace

std::vector<NamedPlan> op_plans() {
  std::vector<NamedPlan> v;
  v.push_back(conv("Conv 3x3 pad 1 bias relu", 3, 10, 8, 3, 1, 1, 1, 1, true, true));
  v.push_back(conv("Conv 5x5 stride 2 dilation 2 group 2", 4, 13, 6, 5, 2, 2, 2, 2, false, false));
  v.push_back(conv("Conv 1x1 pointwise", 16, 6, 8, 1, 1, 0, 1, 1, true, false));
  v.push_back(conv("Conv 7x7 stride 2 (resnet stem)", 3, 32, 16, 7, 2, 3, 1, 1, true, true));
  v.push_back(conv_transpose("ConvTranspose k2 s2 (U-Net)", 8, 5, 4, 2, 2, 0, 0, 1, 1, true));
  v.push_back(conv_transpose("ConvTranspose k3 s2 p1 output_padding 1", 4, 6, 6, 3, 2, 1, 0, 1, 1, false));
  v.push_back(conv_transpose("ConvTranspose k4 s2 p1 group 2 dilation 2", 4, 5, 6, 4, 2, 1, 1, 2, 2, true));
  // Asymmetric pads (bottom/right only enter the output size), non-square kernels, strides
  // and dilations, depthwise and grouped 1x1 convs, and the 1x1 convs that must not take the
  // pointwise (no im2col) path: a stride, or a bottom/right pad that makes OH > H.
  v.push_back(conv2("Conv 3x3 asymmetric pads [0,1,2,1]", 3, 9, 11, 5, V{3, 3}, V{1, 1}, V{0, 1, 2, 1}, V{1, 1}, 1, true, false));
  v.push_back(conv2("Conv 1x3 stride [2,1] dilation [1,2]", 4, 10, 12, 6, V{1, 3}, V{2, 1}, V{1, 2, 0, 2}, V{1, 2}, 1, true, true));
  v.push_back(conv2("Conv 1x1 pads [0,0,1,2] (not pointwise)", 5, 6, 7, 4, V{1, 1}, V{1, 1}, V{0, 0, 1, 2}, V{1, 1}, 1, true, false));
  v.push_back(conv2("Conv 1x1 stride 2", 6, 9, 9, 4, V{1, 1}, V{2, 2}, V{0, 0, 0, 0}, V{1, 1}, 1, false, true));
  v.push_back(conv2("Conv 1x1 group 2", 6, 5, 5, 4, V{1, 1}, V{1, 1}, V{0, 0, 0, 0}, V{1, 1}, 2, true, false));
  v.push_back(conv2("Conv 3x3 depthwise (group = C) bias relu", 8, 7, 7, 8, V{3, 3}, V{1, 1}, V{1, 1, 1, 1}, V{1, 1}, 8, true, true));
  // The direct grouped kernel (conv_is_direct: at most kConvDirectMaxTaps taps a group) and the
  // GEMM-per-group path it leaves for wide groups: a channel multiplier, a strided 5x5 depthwise
  // with asymmetric pads, a dilated 7x7, and groups of 40 channels (360 taps: the GEMM path).
  v.push_back(conv2("Conv 3x3 depthwise multiplier 2 stride 2", 6, 9, 8, 12, V{3, 3}, V{2, 2}, V{1, 1, 1, 1}, V{1, 1}, 6, true, false));
  v.push_back(conv2("Conv 5x5 depthwise stride 2 pads [2,1,2,2] relu", 5, 11, 10, 5, V{5, 5}, V{2, 2}, V{2, 1, 2, 2}, V{1, 1}, 5, true, true));
  v.push_back(conv2("Conv 7x7 depthwise dilation 2 no bias", 4, 15, 13, 4, V{7, 7}, V{1, 1}, V{6, 6, 6, 6}, V{2, 2}, 4, false, false));
  v.push_back(conv2("Conv 3x3 group 4 of 8 channels (direct)", 32, 6, 7, 16, V{3, 3}, V{1, 1}, V{1, 1, 1, 1}, V{1, 1}, 4, true, true));
  v.push_back(conv2("Conv 3x3 group 2 of 40 channels (GEMM per group)", 80, 5, 6, 8, V{3, 3}, V{1, 1}, V{1, 1, 1, 1}, V{1, 1}, 2, true, false));
  v.push_back(conv2("Conv 1x1 pointwise relu no bias", 7, 4, 5, 3, V{1, 1}, V{1, 1}, V{0, 0, 0, 0}, V{1, 1}, 1, false, true));
  // Per-sample im2col of 16*9*280*280 = 11.3M elements: the backend's 32M-element scratch holds
  // 2 samples, so batch 3 runs in two chunks (the second at a sample offset).
  v.push_back(conv2("Conv 3x3 batch in im2col chunks", 16, 282, 282, 4, V{3, 3}, V{1, 1}, V{0, 0, 0, 0}, V{1, 1}, 1, true, false));
  {  // Gemm: transB, bias [N], alpha/beta, relu
    NamedPlan np{"Gemm transB bias relu", {}};
    auto& b = np.plan;
    int x = b.input("x", {20});
    int w = b.weight("w", {12, 20}, rnd(240, 21));
    int c = b.weight("c", {12}, rnd(12, 22));
    int y = b.output("y", {12});
    b.op("Gemm", {x, w, c}, {y}, Attrs{{"alpha", 0.5}, {"beta", 2.0}, {"transA", false}, {"transB", true}, {"activation", std::string("relu")}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Gemm no transB scalar C", {}};
    auto& b = np.plan;
    int x = b.input("x", {9});
    int w = b.weight("w", {9, 5}, rnd(45, 23));
    int c = b.weight("c", {1}, {0.25f});
    int y = b.output("y", {5});
    b.op("Gemm", {x, w, c}, {y}, Attrs{{"transB", false}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Gemm no C, alpha 1.5, no relu", {}};
    auto& b = np.plan;
    int x = b.input("x", {7});
    int w = b.weight("w", {7, 4}, rnd(28, 25));
    int y = b.output("y", {4});
    b.op("Gemm", {x, w, -1}, {y}, Attrs{{"alpha", 1.5}, {"beta", 1.0}, {"transB", false}});
    v.push_back(std::move(np));
  }
  {  // beta 0: C is ignored (whatever its shape would have been)
    NamedPlan np{"Gemm beta 0 ignores C", {}};
    auto& b = np.plan;
    int x = b.input("x", {6});
    int w = b.weight("w", {3, 6}, rnd(18, 26));
    int c = b.weight("c", {3}, rnd(3, 27));
    int y = b.output("y", {3});
    b.op("Gemm", {x, w, c}, {y}, Attrs{{"alpha", 1.0}, {"beta", 0.0}, {"transB", true}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Gemm per-column C, no transB, alpha/beta", {}};
    auto& b = np.plan;
    int x = b.input("x", {8});
    int w = b.weight("w", {8, 5}, rnd(40, 28));
    int c = b.weight("c", {5}, rnd(5, 29));
    int y = b.output("y", {5});
    b.op("Gemm", {x, w, c}, {y}, Attrs{{"alpha", -0.75}, {"beta", 0.5}, {"transB", false}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MatMul 2-D A", {}};
    auto& b = np.plan;
    int x = b.input("x", {6});
    int w = b.weight("w", {6, 3}, rnd(18, 31));
    int y = b.output("y", {3});
    b.op("MatMul", {x, w}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MatMul 4-D A", {}};
    auto& b = np.plan;
    int x = b.input("x", {2, 3, 5});
    int w = b.weight("w", {5, 4}, rnd(20, 32));
    int y = b.output("y", {2, 3, 4});
    b.op("MatMul", {x, w}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MatMul 3-D A", {}};
    auto& b = np.plan;
    int x = b.input("x", {4, 6});
    int w = b.weight("w", {6, 3}, rnd(18, 24));
    int y = b.output("y", {4, 3});
    b.op("MatMul", {x, w}, {y});
    v.push_back(std::move(np));
  }
  const char* bins[] = {"Add", "Sub", "Mul", "Div"};
  for (int i = 0; i < 4; ++i) {
    NamedPlan np{std::string(bins[i]) + " per-channel weight", {}};
    auto& b = np.plan;
    int x = b.input("x", {3, 4, 5});
    std::vector<float> wd = rnd(3, 30 + i);
    for (auto& f : wd) f += (i == 3) ? 2.f : 0.f;  // keep divisors away from 0
    int w = b.weight("w", {3, 1, 1}, wd);
    int y = b.output("y", {3, 4, 5});
    b.op(bins[i], {x, w}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Add two activations broadcast [C,H,W]+[1,H,1]", {}};
    auto& b = np.plan;
    int x = b.input("x", {3, 4, 5});
    int z = b.input("z", {1, 4, 1});
    int y = b.output("y", {3, 4, 5});
    b.op("Add", {x, z}, {y});
    v.push_back(std::move(np));
  }
  // Operand order matters for Sub and Div: the weight on the left; lower-rank and scalar
  // weights; two activations of one shape; rank 5.
  v.push_back(binary("Sub weight - x", "Sub", V{1, 4, 5}, true, V{3, 4, 5}, false, V{3, 4, 5}, 61));
  {  // divisor an activation, kept in [2, 4] by an Add first (fp16 must not see huge quotients)
    NamedPlan np{"Div weight / activation", {}};
    auto& b = np.plan;
    int x = b.input("x", {3, 4, 5});
    int k = b.weight("k", {1}, {3.f});
    int t = b.act("t", {3, 4, 5});
    b.op("Add", {x, k}, {t});
    int w = b.weight("w", {5}, rnd(5, 62));
    int y = b.output("y", {3, 4, 5});
    b.op("Div", {w, t}, {y});
    v.push_back(std::move(np));
  }
  v.push_back(binary("Div x / scalar weight", "Div", V{3, 4, 5}, false, V{1}, true, V{3, 4, 5}, 63, 2.f));
  v.push_back(binary("Mul two activations same shape", "Mul", V{3, 4, 5}, false, V{3, 4, 5}, false, V{3, 4, 5}, 64));
  v.push_back(binary("Add rank 5 weight [2,1,3,1]", "Add", V{2, 3, 3, 4}, false, V{2, 1, 3, 1}, true, V{2, 3, 3, 4}, 65));
  v.push_back(binary("Sub activation broadcast [1,4,1] - [3,4,5]", "Sub", V{1, 4, 1}, false, V{3, 4, 5}, false, V{3, 4, 5}, 66));
  v.push_back(unary("Relu"));
  v.push_back(unary("LeakyRelu"));  // the reader's default alpha 0.01
  v.back().name = "LeakyRelu default alpha";
  v.push_back(unary("LeakyRelu", Attrs{{"alpha", 0.1}}));
  v.push_back(unary("Sigmoid"));
  v.push_back(unary("Tanh"));
  v.push_back(unary("Erf"));
  v.push_back(unary("Gelu", Attrs{{"approximate", std::string("none")}}));
  v.back().name = "Gelu erf";
  v.push_back(unary("Gelu", Attrs{{"approximate", std::string("tanh")}}));
  v.back().name = "Gelu tanh";
  v.push_back(pool("MaxPool 3x3 s2 p1", "MaxPool", 3, 2, 1, 1, false, false));
  v.push_back(pool("MaxPool 2x2 s2 ceil", "MaxPool", 2, 2, 0, 0, true, false));
  v.push_back(pool("AveragePool 3x3 s2 p1 exclude pad", "AveragePool", 3, 2, 1, 1, false, false));
  v.push_back(pool("AveragePool 3x3 s2 p1 include pad ceil", "AveragePool", 3, 2, 1, 1, true, true));
  v.push_back(pool2("MaxPool 3x3 dilation 2 pad 2", "MaxPool", 3, 11, 10, V{3, 3}, V{1, 2}, V{2, 2, 2, 2}, V{2, 2}, false, false));
  v.push_back(pool2("MaxPool 3x2 stride [1,2] pads [1,0,0,1] ceil", "MaxPool", 2, 8, 9, V{3, 2}, V{1, 2}, V{1, 0, 0, 1}, V{1, 1}, true, false));
  v.push_back(pool2("AveragePool 2x2 s2 ceil exclude pad (partial window)", "AveragePool", 3, 7, 9, V{2, 2}, V{2, 2}, V{0, 0, 0, 0}, V{1, 1}, true, false));
  v.push_back(pool2("AveragePool 3x3 s2 ceil include pad, no pads", "AveragePool", 3, 8, 8, V{3, 3}, V{2, 2}, V{0, 0, 0, 0}, V{1, 1}, true, true));
  v.push_back(pool2("AveragePool 3x2 asymmetric pads [0,1,2,0] include pad", "AveragePool", 2, 7, 6, V{3, 2}, V{2, 1}, V{0, 1, 2, 0}, V{1, 1}, false, true));
  {
    NamedPlan np{"GlobalAveragePool 1-D [N,C,L]", {}};
    int x = np.plan.input("x", {5, 33});
    int y = np.plan.output("y", {5, 1});
    np.plan.op("GlobalAveragePool", {x}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"GlobalAveragePool", {}};
    int x = np.plan.input("x", {6, 7, 7});
    int y = np.plan.output("y", {6, 1, 1});
    np.plan.op("GlobalAveragePool", {x}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Flatten", {}};
    int x = np.plan.input("x", {2, 3, 4});
    int y = np.plan.output("y", {24});
    np.plan.op("Flatten", {x}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Reshape", {}};
    int x = np.plan.input("x", {2, 3, 4});
    int y = np.plan.output("y", {6, 4});
    np.plan.op("Reshape", {x}, {y}, Attrs{{"shape", V{-1, 6, 4}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Transpose NCHW->NHWC", {}};
    int x = np.plan.input("x", {3, 4, 5});
    int y = np.plan.output("y", {4, 5, 3});
    np.plan.op("Transpose", {x}, {y}, Attrs{{"perm", V{0, 2, 3, 1}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Transpose rank 5 perm [0,3,1,4,2]", {}};
    int x = np.plan.input("x", {2, 3, 4, 5});
    int y = np.plan.output("y", {4, 2, 5, 3});
    np.plan.op("Transpose", {x}, {y}, Attrs{{"perm", V{0, 3, 1, 4, 2}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Transpose rank 3 perm [0,2,1]", {}};
    int x = np.plan.input("x", {6, 7});
    int y = np.plan.output("y", {7, 6});
    np.plan.op("Transpose", {x}, {y}, Attrs{{"perm", V{0, 2, 1}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Transpose rank 2 identity", {}};
    int x = np.plan.input("x", {9});
    int y = np.plan.output("y", {9});
    np.plan.op("Transpose", {x}, {y}, Attrs{{"perm", V{0, 1}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat axis 2 of 4-D, three inputs", {}};
    int a = np.plan.input("a", {3, 2, 4});
    int c = np.plan.input("c", {3, 1, 4});
    int e = np.plan.input("e", {3, 3, 4});
    int y = np.plan.output("y", {3, 6, 4});
    np.plan.op("Concat", {a, c, e}, {y}, Attrs{{"axis", int64_t(2)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat axis 3 (last)", {}};
    int a = np.plan.input("a", {2, 3, 5});
    int c = np.plan.input("c", {2, 3, 2});
    int y = np.plan.output("y", {2, 3, 7});
    np.plan.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(3)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Reshape keeping its folded shape input", {}};
    int x = np.plan.input("x", {4, 6});
    int sh = np.plan.weight("shape", {3}, {-1.f, 8.f, 3.f});
    int y = np.plan.output("y", {8, 3});
    np.plan.op("Reshape", {x, sh}, {y}, Attrs{{"shape", V{-1, 8, 3}}});
    v.push_back(std::move(np));
  }
  {  // outer > batch and inner > 1
    NamedPlan np{"Softmax axis 2 of 4-D", {}};
    int x = np.plan.input("x", {3, 5, 4});
    int y = np.plan.output("y", {3, 5, 4});
    np.plan.op("Softmax", {x}, {y}, Attrs{{"axis", int64_t(2)}});
    v.push_back(std::move(np));
  }
  {  // logits up to +-200: exp overflows without the max subtraction. fp32 only: half
     // storage of such logits moves them by up to 0.06, which moves the probabilities by more
     // than the fp16 tolerance (a property of half, not of the kernel).
    NamedPlan np{"Softmax of large logits, long row", {}, false};
    auto& b = np.plan;
    int x = b.input("x", {1000});
    int k = b.weight("k", {1}, {200.f});
    int t = b.act("t", {1000});
    b.op("Mul", {x, k}, {t});
    int y = b.output("y", {1000});
    b.op("Softmax", {t}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat axis 1", {}};
    int a = np.plan.input("a", {2, 3, 3});
    int c = np.plan.input("c", {5, 3, 3});
    int y = np.plan.output("y", {7, 3, 3});
    np.plan.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {  // a classifier head trained with NLLLoss
    NamedPlan np{"LogSoftmax axis 1 of 2-D", {}};
    int x = np.plan.input("x", {10});
    int y = np.plan.output("y", {10});
    np.plan.op("LogSoftmax", {x}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Softmax axis 1 of 2-D", {}};
    int x = np.plan.input("x", {10});
    int y = np.plan.output("y", {10});
    np.plan.op("Softmax", {x}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Softmax axis 1 of 3-D (inner > 1)", {}};
    int x = np.plan.input("x", {4, 6});
    int y = np.plan.output("y", {4, 6});
    np.plan.op("Softmax", {x}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  // Transformer ops.
  {
    NamedPlan np{"Attention, causal weight mask [1,1,S,S]", {}};
    const int64_t S = 40;
    std::vector<float> mask(size_t(S * S));
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) mask[size_t(i * S + j)] = j > i ? -1e9f : 0.f;
    int q = np.plan.input("q", {3, S, 8});
    int kt = np.plan.input("kt", {3, 8, S});
    int vv = np.plan.input("v", {3, S, 6});
    int m = np.plan.weight("mask", {1, 1, S, S}, mask);
    int y = np.plan.output("y", {3, S, 6});
    np.plan.op("Attention", {q, kt, vv, m}, {y}, Attrs{{"scale", 0.35}});
    v.push_back(std::move(np));
  }
  {  // -FLT_MAX masks with whole rows masked: both backends give those rows uniform weights
    // (fp16 used to turn the mask into -inf and the rows into NaN).
    NamedPlan np{"Attention, fully masked rows, -FLT_MAX weight mask", {}};
    const int64_t S = 6;
    std::vector<float> mask(size_t(S * S));
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) mask[size_t(i * S + j)] = (i % 2 == 0 || j > i) ? -FLT_MAX : 0.f;
    int q = np.plan.input("q", {2, S, 4});
    int kt = np.plan.input("kt", {2, 4, S});
    int vv = np.plan.input("v", {2, S, 3});
    int m = np.plan.weight("mask", {1, 1, S, S}, mask);
    int y = np.plan.output("y", {2, S, 3});
    np.plan.op("Attention", {q, kt, vv, m}, {y}, Attrs{{"scale", 0.5}});
    v.push_back(std::move(np));
  }
  {  // the unfused form: Softmax over scores + a -FLT_MAX mask, a whole row masked
    NamedPlan np{"Softmax of x + fully masking -FLT_MAX row", {}};
    std::vector<float> mask(24, 0.f);
    for (int k = 0; k < 6; ++k) mask[size_t(k)] = -FLT_MAX;  // row 0 fully masked
    mask[10] = -FLT_MAX;
    int x = np.plan.input("x", {4, 6});
    int mw = np.plan.weight("mask", {4, 6}, mask);
    int s = np.plan.act("s", {4, 6});
    int y = np.plan.output("y", {4, 6});
    np.plan.op("Add", {x, mw}, {s});
    np.plan.op("Softmax", {s}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Attention, padding mask activation [1,1,T], no heads", {}};
    int q = np.plan.input("q", {7, 8});
    int kt = np.plan.input("kt", {8, 9});
    int vv = np.plan.input("v", {9, 5});
    int m = np.plan.input("mask", {1, 9});
    int y = np.plan.output("y", {7, 5});
    np.plan.op("Attention", {q, kt, vv, m}, {y}, Attrs{{"scale", 0.5}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"LayerNormalization last axis with bias", {}};
    int x = np.plan.input("x", {5, 48});
    int g = np.plan.weight("g", {48}, rnd(48, 81));
    int bb = np.plan.weight("b", {48}, rnd(48, 82));
    int y = np.plan.output("y", {5, 48});
    np.plan.op("LayerNormalization", {x, g, bb}, {y}, Attrs{{"axis", int64_t(2)}, {"epsilon", 1e-5}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"LayerNormalization axes 1.. without bias", {}};
    int x = np.plan.input("x", {3, 7});
    int g = np.plan.weight("g", {3, 7}, rnd(21, 83));
    int y = np.plan.output("y", {3, 7});
    np.plan.op("LayerNormalization", {x, g, -1}, {y}, Attrs{{"axis", int64_t(1)}, {"epsilon", 1e-3}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MatMul two activations [H,S,d]x[H,d,S]", {}};
    int a = np.plan.input("a", {4, 9, 8});
    int b = np.plan.input("b", {4, 8, 9});
    int y = np.plan.output("y", {4, 9, 9});
    np.plan.op("MatMul", {a, b}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MatMul broadcast heads [2,3,5,4]x[1,3,4,6]", {}};
    int a = np.plan.input("a", {2, 3, 5, 4});
    int b = np.plan.input("b", {1, 3, 4, 6});
    int y = np.plan.output("y", {2, 3, 5, 6});
    np.plan.op("MatMul", {a, b}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MatMul N-D weight B [3,4,6]", {}};
    int a = np.plan.input("a", {3, 5, 4});
    int w = np.plan.weight("w", {3, 4, 6}, rnd(72, 84));
    int y = np.plan.output("y", {3, 5, 6});
    np.plan.op("MatMul", {a, w}, {y});
    v.push_back(std::move(np));
  }
  for (const char* op : {"Sqrt", "Reciprocal", "Log"}) {  // positive inputs: Abs first
    NamedPlan np{std::string(op) + " of |x| + 1", {}};
    int x = np.plan.input("x", {3, 5, 7});
    int a = np.plan.act("abs", {3, 5, 7});
    int one = np.plan.weight("one", {1}, {1.f});
    int p = np.plan.act("pos", {3, 5, 7});
    int y = np.plan.output("y", {3, 5, 7});
    np.plan.op("Abs", {x}, {a});
    np.plan.op("Add", {a, one}, {p});
    np.plan.op(op, {p}, {y});
    v.push_back(std::move(np));
  }
  v.push_back(unary("Exp"));
  v.push_back(unary("Neg"));
  v.push_back(unary("Sin"));
  v.push_back(unary("Cos"));
  for (const char* op : {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh", "Elu", "Selu", "Celu",
                         "Softplus", "Softsign", "Mish", "ThresholdedRelu"})
    v.push_back(unary(op));
  v.push_back(unary("Elu", Attrs{{"alpha", 0.3}}));
  v.back().name = "Elu alpha 0.3";
  v.push_back(unary("Selu", Attrs{{"alpha", 2.0}, {"gamma", 0.5}}));
  v.back().name = "Selu alpha 2 gamma 0.5";
  {
    NamedPlan np{"Acosh of |x| + 1", {}};
    int x = np.plan.input("x", {3, 5, 7});
    int a = np.plan.act("abs", {3, 5, 7});
    int one = np.plan.weight("one", {1}, {1.f});
    int p = np.plan.act("ge1", {3, 5, 7});
    int y = np.plan.output("y", {3, 5, 7});
    np.plan.op("Abs", {x}, {a});
    np.plan.op("Add", {a, one}, {p});
    np.plan.op("Acosh", {p}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"PRelu per channel", {}};
    int x = np.plan.input("x", {3, 5, 7});
    int s = np.plan.weight("slope", {3, 1, 1}, {0.25f, -0.5f, 1.5f});
    int y = np.plan.output("y", {3, 5, 7});
    np.plan.op("PRelu", {x, s}, {y});
    v.push_back(std::move(np));
  }
  v.push_back(unary("Pow", Attrs{{"exponent", 2.0}}));
  v.push_back(unary("Pow", Attrs{{"exponent", 3.0}}));
  {
    NamedPlan np{"ReduceMean last axis keepdims", {}};
    int x = np.plan.input("x", {6, 40});
    int y = np.plan.output("y", {6, 1});
    np.plan.op("ReduceMean", {x}, {y}, Attrs{{"axes", V{2}}, {"keepdims", true}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"ReduceSum middle axis", {}};
    int x = np.plan.input("x", {4, 5, 6});
    int y = np.plan.output("y", {4, 6});
    np.plan.op("ReduceSum", {x}, {y}, Attrs{{"axes", V{2}}, {"keepdims", false}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"ReduceMax axes 1 and 3", {}};
    int x = np.plan.input("x", {4, 5, 6});
    int y = np.plan.output("y", {1, 5, 1});
    np.plan.op("ReduceMax", {x}, {y}, Attrs{{"axes", V{1, 3}}, {"keepdims", true}});
    v.push_back(std::move(np));
  }
  for (auto& np : cnn_op_plans()) v.push_back(std::move(np));
  return v;
}

std::vector<NamedPlan> rejected_plans() {
  std::vector<NamedPlan> v;
  {  // the batch must stay first: a per-sample arena layout cannot hold it otherwise
    NamedPlan np{"Transpose perm[0] != 0", {}};
    int x = np.plan.input("x", {3, 4});
    int y = np.plan.output("y", {3, 4});
    np.plan.op("Transpose", {x}, {y}, Attrs{{"perm", V{1, 0, 2}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Transpose perm not a permutation", {}};
    int x = np.plan.input("x", {3, 4});
    int y = np.plan.output("y", {3, 3});
    np.plan.op("Transpose", {x}, {y}, Attrs{{"perm", V{0, 1, 1}}});
    v.push_back(std::move(np));
  }
  {  // im2col would index W with the attribute's kernel
    NamedPlan np{"Conv kernel attr differs from W", {}};
    auto& b = np.plan;
    int x = b.input("x", {2, 6, 6});
    int w = b.weight("w", {3, 2, 3, 3}, rnd(54, 71));
    int y = b.output("y", {3, 6, 6});
    b.op("Conv", {x, w, -1}, {y}, Attrs{{"kernel", V{1, 1}}, {"strides", V{1, 1}}, {"pads", V{0, 0, 0, 0}},
                                        {"dilations", V{1, 1}}, {"group", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {  // the launcher would write the plan's OH x OW, not what the conv produces
    NamedPlan np{"Conv output shape differs from the computed one", {}};
    auto& b = np.plan;
    int x = b.input("x", {2, 6, 6});
    int w = b.weight("w", {3, 2, 3, 3}, rnd(54, 72));
    int y = b.output("y", {3, 6, 6});
    b.op("Conv", {x, w, -1}, {y}, Attrs{{"kernel", V{3, 3}}, {"strides", V{1, 1}}, {"pads", V{0, 0, 0, 0}},
                                        {"dilations", V{1, 1}}, {"group", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {  // an activation of lower rank would align its batch with another dimension
    NamedPlan np{"Add activation of lower rank", {}};
    int x = np.plan.input("x", {3, 4});
    int z = np.plan.input("z", {4});
    int y = np.plan.output("y", {3, 4});
    np.plan.op("Add", {x, z}, {y});
    v.push_back(std::move(np));
  }
  {  // the GEMM would write 4 floats per sample into a 2-float tensor
    NamedPlan np{"MatMul output smaller than A x B", {}};
    auto& b = np.plan;
    int x = b.input("x", {5});
    int w = b.weight("w", {5, 4}, rnd(20, 73));
    int y = b.output("y", {2});
    b.op("MatMul", {x, w}, {y});
    v.push_back(std::move(np));
  }
  {  // [N, 1] would broadcast per row in ONNX, not per column
    NamedPlan np{"Gemm C of shape [N, 1]", {}};
    auto& b = np.plan;
    int x = b.input("x", {3});
    int w = b.weight("w", {3, 3}, rnd(9, 74));
    int c = b.weight("c", {3, 1}, rnd(3, 75));
    int y = b.output("y", {3});
    b.op("Gemm", {x, w, c}, {y}, Attrs{{"transB", false}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MaxPool output shape differs from the computed one", {}};
    int x = np.plan.input("x", {2, 8, 8});
    int y = np.plan.output("y", {2, 5, 5});
    np.plan.op("MaxPool", {x}, {y}, Attrs{{"kernel", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{0, 0, 0, 0}}, {"dilations", V{1, 1}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat inputs do not add up", {}};
    int a = np.plan.input("a", {2, 3});
    int c = np.plan.input("c", {2, 3});
    int y = np.plan.output("y", {5, 3});
    np.plan.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  return v;
}

// conv(3->8, relu) -> maxpool -> conv(8->8) + skip -> relu -> GAP -> flatten -> gemm -> softmax
NamedPlan model_plan() {
  NamedPlan np{"model: residual CNN", {}};
  PlanBuilder& b = np.plan;
  Attrs c3{{"kernel", V{3, 3}}, {"strides", V{1, 1}}, {"pads", V{1, 1, 1, 1}}, {"dilations", V{1, 1}}, {"group", int64_t(1)}};
  int x = b.input("x", {3, 16, 16});
  int w1 = b.weight("w1", {8, 3, 3, 3}, rnd(216, 41));
  int b1 = b.weight("b1", {8}, rnd(8, 42));
  int a1 = b.act("a1", {8, 16, 16});
  Attrs c3r = c3;
  c3r.push_back({"activation", std::string("relu")});
  b.op("Conv", {x, w1, b1}, {a1}, c3r);
  int p1 = b.act("p1", {8, 8, 8});
  b.op("MaxPool", {a1}, {p1}, Attrs{{"kernel", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{0, 0, 0, 0}}, {"dilations", V{1, 1}}});
  int w2 = b.weight("w2", {8, 8, 3, 3}, rnd(576, 43));
  int a2 = b.act("a2", {8, 8, 8});
  b.op("Conv", {p1, w2, -1}, {a2}, c3);
  int s = b.act("s", {8, 8, 8});
  b.op("Add", {a2, p1}, {s});
  int r = b.act("r", {8, 8, 8});
  b.op("Relu", {s}, {r});
  int g = b.act("g", {8, 1, 1});
  b.op("GlobalAveragePool", {r}, {g});
  int f = b.act("f", {8});
  b.op("Flatten", {g}, {f}, Attrs{{"axis", int64_t(1)}});
  int wf = b.weight("wf", {10, 8}, rnd(80, 44));
  int bf = b.weight("bf", {10}, rnd(10, 45));
  int l = b.act("l", {10});
  b.op("Gemm", {f, wf, bf}, {l}, Attrs{{"transB", true}});
  int y = b.output("y", {10});
  b.op("Softmax", {l}, {y}, Attrs{{"axis", int64_t(1)}});
  return np;
}

}  // namespace cudatest
