#include "test_plans.h"

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

}  // namespace

std::vector<NamedPlan> op_plans() {
  std::vector<NamedPlan> v;
  v.push_back(conv("Conv 3x3 pad 1 bias relu", 3, 10, 8, 3, 1, 1, 1, 1, true, true));
  v.push_back(conv("Conv 5x5 stride 2 dilation 2 group 2", 4, 13, 6, 5, 2, 2, 2, 2, false, false));
  v.push_back(conv("Conv 1x1 pointwise", 16, 6, 8, 1, 1, 0, 1, 1, true, false));
  v.push_back(conv("Conv 7x7 stride 2 (resnet stem)", 3, 32, 16, 7, 2, 3, 1, 1, true, true));
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
  v.push_back(unary("Relu"));
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
    NamedPlan np{"Concat axis 1", {}};
    int a = np.plan.input("a", {2, 3, 3});
    int c = np.plan.input("c", {5, 3, 3});
    int y = np.plan.output("y", {7, 3, 3});
    np.plan.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(1)}});
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
