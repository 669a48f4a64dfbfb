// Plans for the plan v2 ops on the CUDA backend: int64/int32/bool tensors, the batch at an
// axis other than 0, and every data op of the CPU backend (cpu_backend.cc's dispatch), each
// compared with the CPU backend by cuda_vs_cpu on a GPU and validated by cuda_host_checks.
#include <cstdint>

#include "test_plans.h"

namespace cudatest {
namespace {

using mltest::Attrs;
using mltest::PlanBuilder;
using V = std::vector<int64_t>;

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7 % 11) - 5);
  return v;
}

// y = a (op) b for two tensors of `dtype`: a an input [-1, 3, 4], b a weight [4] with a zero
// and -1 (integer Div/Mod by them) or a second input [-1, 1, 4].
NamedPlan binary(const std::string& op, const std::string& dtype, bool weightB, Attrs attrs = {}) {
  const bool pred = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
  // Float comparisons and Mod jump where an operand crosses a value: half storage may move it.
  const bool jumps = dtype == "float32" && (pred || op == "Mod");
  NamedPlan np{op + " " + dtype + (weightB ? " activation x weight [4]" : " two activations broadcast"), {}, !jumps};
  np.intLo = -7;
  np.intHi = 7;
  PlanBuilder& b = np.plan;
  int a = b.tensor("a", {-1, 3, 4}, "input", dtype);
  int w;
  if (!weightB) w = b.tensor("b", {-1, 1, 4}, "input", dtype);
  else if (dtype == "int64") w = b.typed_weight<int64_t>("b", {4}, dtype, {3, -2, 0, -1});
  else if (dtype == "int32") w = b.typed_weight<int32_t>("b", {4}, dtype, {3, -2, 0, -1});
  else w = b.weight("b", {4}, {0.75f, -1.5f, 2.f, -0.25f});
  int y = b.tensor("y", {-1, 3, 4}, "output", pred ? "bool" : dtype);
  b.op(op, {a, w}, {y}, std::move(attrs));
  return np;
}

NamedPlan cast(const std::string& from, const std::string& to, bool fp16) {
  NamedPlan np{"Cast " + from + " -> " + to, {}, fp16};
  np.intLo = -3;
  np.intHi = 3;
  int x = np.plan.tensor("x", {-1, 2, 5}, "input", from);
  int y = np.plan.tensor("y", {-1, 2, 5}, "output", to);
  np.plan.op("Cast", {x}, {y}, Attrs{{"to", to}});
  return np;
}

std::vector<NamedPlan> elementwise_plans() {
  std::vector<NamedPlan> v;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) v.push_back(binary(op, "int64", true));
  v.push_back(binary("Mod", "int64", true, Attrs{{"fmod", int64_t(0)}}));
  v.push_back(binary("Mod", "int64", false, Attrs{{"fmod", int64_t(1)}}));
  v.push_back(binary("Div", "int32", true));
  v.push_back(binary("Mod", "int32", true, Attrs{{"fmod", int64_t(0)}}));
  v.push_back(binary("Mod", "float32", true, Attrs{{"fmod", int64_t(1)}}));
  v.push_back(binary("Max", "float32", false));
  v.push_back(binary("Min", "float32", false));
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) v.push_back(binary(op, "int64", false));
  v.push_back(binary("Less", "float32", true));
  v.push_back(binary("Equal", "int32", true));
  for (const char* op : {"And", "Or"}) {
    NamedPlan np{std::string(op) + " bool broadcast", {}};
    int a = np.plan.tensor("a", {-1, 3, 4}, "input", "bool"), c = np.plan.tensor("c", {-1, 1, 4}, "input", "bool");
    int y = np.plan.tensor("y", {-1, 3, 4}, "output", "bool");
    np.plan.op(op, {a, c}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Not bool", {}};
    int a = np.plan.tensor("a", {-1, 6}, "input", "bool"), y = np.plan.tensor("y", {-1, 6}, "output", "bool");
    np.plan.op("Not", {a}, {y});
    v.push_back(std::move(np));
  }
  {  // BERT's mask: Where(cond, scalar, activation)
    NamedPlan np{"Where bool [n,1,4] ? float scalar : float [n,3,4]", {}};
    PlanBuilder& b = np.plan;
    int c = b.tensor("c", {-1, 1, 4}, "input", "bool"), z = b.tensor("z", {-1, 3, 4}, "input");
    int s = b.weight("s", {}, {-3.5f});
    int y = b.tensor("y", {-1, 3, 4}, "output");
    b.op("Where", {c, s, z}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Where int64 two activations", {}};
    np.intLo = -9;
    np.intHi = 9;
    PlanBuilder& b = np.plan;
    int c = b.tensor("c", {-1, 3, 4}, "input", "bool"), x = b.tensor("x", {-1, 3, 4}, "input", "int64");
    int z = b.tensor("z", {-1, 1, 4}, "input", "int64"), y = b.tensor("y", {-1, 3, 4}, "output", "int64");
    b.op("Where", {c, x, z}, {y});
    v.push_back(std::move(np));
  }
  v.push_back(cast("float32", "int64", false));  // truncation of values half may round across an integer
  v.push_back(cast("float32", "int32", false));
  v.push_back(cast("float32", "bool", true));
  v.push_back(cast("int64", "float32", true));
  v.push_back(cast("int64", "int32", true));
  v.push_back(cast("int32", "int64", true));
  v.push_back(cast("int64", "bool", true));
  v.push_back(cast("bool", "float32", true));
  v.push_back(cast("bool", "int64", true));
  {  // ViT's class token expanded over the batch, and an int64 activation expanded
    NamedPlan np{"Expand weight [1,1,4] and int64 [n,1,4] to [n,3,4]", {}};
    PlanBuilder& b = np.plan;
    int w = b.weight("tok", {1, 1, 4}, ramp(4, 0.5f));
    int x = b.tensor("x", {-1, 1, 4}, "input", "int64");
    int y1 = b.tensor("y1", {-1, 3, 4}, "output"), y2 = b.tensor("y2", {-1, 3, 4}, "output", "int64");
    b.op("Expand", {w}, {y1});
    b.op("Expand", {x}, {y2});
    v.push_back(std::move(np));
  }
  return v;
}

std::vector<NamedPlan> indexing_plans() {
  std::vector<NamedPlan> v;
  {  // an embedding lookup, negative ids included
    NamedPlan np{"Gather embedding [10,6] by int64 ids [n,5]", {}};
    np.intLo = -10;
    np.intHi = 9;
    PlanBuilder& b = np.plan;
    int w = b.weight("emb", {10, 6}, ramp(60, 0.125f));
    int ids = b.tensor("ids", {-1, 5}, "input", "int64");
    int y = b.tensor("y", {-1, 5, 6}, "output");
    b.op("Gather", {w, ids}, {y}, Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Gather axis 1 of an activation by int32 constants", {}};
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {-1, 5, 4}, "input");
    int i = b.typed_weight<int32_t>("i", {3}, "int32", {4, 0, -1});
    int y = b.tensor("y", {-1, 3, 4}, "output");
    b.op("Gather", {x, i}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {  // transformers' masks: a [batch * 3] table addressed by run-time indices
    NamedPlan np{"Gather from a flat [3n] table by run-time ids", {}};
    np.intLo = 0;
    np.intHi = 2;
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {-1, 3}, "input"), t = b.tensor("t", {-3}, "activation");
    int ids = b.tensor("ids", {-1, 2}, "input", "int64");
    int y = b.tensor("y", {-1, 2}, "output");
    b.op("Reshape", {x}, {t}, Attrs{{"shape", V{-3}}});
    b.op("Gather", {t, ids}, {y}, Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"GatherND r=1 of a weight [5,4] by int64 [n,3,1]", {}};
    np.intLo = -5;
    np.intHi = 4;
    PlanBuilder& b = np.plan;
    int w = b.weight("w", {5, 4}, ramp(20, 0.25f));
    int idx = b.tensor("idx", {-1, 3, 1}, "input", "int64");
    int y = b.tensor("y", {-1, 3, 4}, "output");
    b.op("GatherND", {w, idx}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"GatherND r=2 of a weight [3,5,2] by int32 [n,2]", {}};
    np.intLo = 0;
    np.intHi = 2;
    PlanBuilder& b = np.plan;
    int w = b.weight("w", {3, 5, 2}, ramp(30, 0.25f));
    int idx = b.tensor("idx", {-1, 2}, "input", "int32");
    int y = b.tensor("y", {-1, 2}, "output");
    b.op("GatherND", {w, idx}, {y});
    v.push_back(std::move(np));
  }
  for (const char* dtype : {"float32", "int64"}) {
    NamedPlan np{std::string("Slice ") + dtype + " axes 1,2 starts 1,7 steps 2,-3", {}};
    np.intLo = -50;
    np.intHi = 50;
    int x = np.plan.tensor("x", {-1, 6, 8}, "input", dtype);
    int y = np.plan.tensor("y", {-1, 3, 3}, "output", dtype);
    np.plan.op("Slice", {x}, {y}, Attrs{{"axes", V{1, 2}}, {"starts", V{1, 7}}, {"steps", V{2, -3}}});
    v.push_back(std::move(np));
  }
  return v;
}

std::vector<NamedPlan> shape_plans() {
  std::vector<NamedPlan> v;
  {  // generators: their values count the whole batch
    NamedPlan np{"Range int64 [3n], ConstantOfShape float and int64", {}};
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {-1, 2}, "input");
    int r = b.tensor("r", {-3}, "activation", "int64"), ro = b.tensor("ro", {-1, 3}, "output", "int64");
    int c = b.tensor("c", {-1, 4}, "output"), k = b.tensor("k", {-1, 2, 2}, "output", "int64");
    int y = b.tensor("y", {-1, 2}, "output");
    b.op("Range", {}, {r}, Attrs{{"start", int64_t(2)}, {"delta", int64_t(3)}});
    b.op("ConstantOfShape", {}, {c}, Attrs{{"value", 2.5}});
    b.op("ConstantOfShape", {}, {k}, Attrs{{"value", int64_t(7)}});
    b.op("Reshape", {r}, {ro}, Attrs{{"shape", V{-1, 3}}});
    b.op("Relu", {x}, {y});
    v.push_back(std::move(np));
  }
  {  // Squeeze / Unsqueeze on data are Reshapes
    NamedPlan np{"Reshape int64 [n,2,3] -> [n,6] and bool [n,4] -> [n,1,4]", {}};
    np.intLo = -100;
    np.intHi = 100;
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {-1, 2, 3}, "input", "int64"), m = b.tensor("m", {-1, 4}, "input", "bool");
    int y = b.tensor("y", {-1, 6}, "output", "int64"), u = b.tensor("u", {-1, 1, 4}, "output", "bool");
    b.op("Reshape", {x}, {y}, Attrs{{"shape", V{-1, 6}}});
    b.op("Reshape", {m}, {u}, Attrs{{"shape", V{-1, 1, 4}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat int64 axis 1 and bool axis 2", {}};
    np.intLo = -100;
    np.intHi = 100;
    PlanBuilder& b = np.plan;
    int a = b.tensor("a", {-1, 2}, "input", "int64"), c = b.tensor("c", {-1, 3}, "input", "int64");
    int p = b.tensor("p", {-1, 2, 1}, "input", "bool"), q = b.tensor("q", {-1, 2, 3}, "input", "bool");
    int y = b.tensor("y", {-1, 5}, "output", "int64"), z = b.tensor("z", {-1, 2, 4}, "output", "bool");
    b.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(1)}});
    b.op("Concat", {p, q}, {z}, Attrs{{"axis", int64_t(2)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat axis 0 with the batch on axis 1", {}};
    PlanBuilder& b = np.plan;
    int a = b.tensor("a", {2, -1, 3}, "input"), c = b.tensor("c", {4, -1, 3}, "input");
    int y = b.tensor("y", {6, -1, 3}, "output");
    b.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(np));
  }
  {  // nn.TransformerEncoder's seq-first layout: the row ops on [S, batch, E]
    NamedPlan np{"seq-first rows: Transpose, MatMul, LayerNorm, Softmax, Add, Gemm on [3,n,4]", {}};
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {-1, 3, 4}, "input");
    int t = b.tensor("t", {3, -1, 4}, "activation"), m = b.tensor("m", {3, -1, 4}, "activation");
    int l = b.tensor("l", {3, -1, 4}, "activation"), s = b.tensor("s", {3, -1, 4}, "activation");
    int a = b.tensor("a", {3, -1, 4}, "activation"), g = b.tensor("g", {3, -1, 5}, "activation");
    int y = b.tensor("y", {-1, 3, 5}, "output");
    int w = b.weight("w", {4, 4}, ramp(16, 0.25f)), sc = b.weight("scale", {4}, {1.f, 0.5f, -1.f, 2.f});
    int gw = b.weight("gw", {5, 4}, ramp(20, 0.125f)), gb = b.weight("gb", {5}, ramp(5, 0.5f));
    b.op("Transpose", {x}, {t}, Attrs{{"perm", V{1, 0, 2}}});
    b.op("MatMul", {t, w}, {m});
    b.op("LayerNormalization", {m, sc}, {l}, Attrs{{"axis", int64_t(2)}, {"epsilon", 1e-5}});
    b.op("Softmax", {l}, {s}, Attrs{{"axis", int64_t(2)}});
    b.op("Add", {s, t}, {a});
    b.op("Gemm", {a, gw, gb}, {g}, Attrs{{"transB", true}});
    b.op("Transpose", {g}, {y}, Attrs{{"perm", V{1, 0, 2}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"batched MatMul [2,n,3,4] x weight [2,1,4,5]", {}};
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {2, -1, 3, 4}, "input");
    int w = b.weight("w", {2, 1, 4, 5}, ramp(40, 0.25f));
    int y = b.tensor("y", {2, -1, 3, 5}, "output");
    b.op("MatMul", {x, w}, {y});
    v.push_back(std::move(np));
  }
  return v;
}

}  // namespace

std::vector<NamedPlan> data_op_plans() {
  std::vector<NamedPlan> v = elementwise_plans();
  for (auto* part : {&indexing_plans, &shape_plans, &position_plans})
    for (NamedPlan& np : (*part)()) v.push_back(std::move(np));
  return v;
}

std::vector<NamedPlan> data_rejected_plans() {
  std::vector<NamedPlan> v = position_rejected_plans();
  {
    NamedPlan np{"Gather along the batch axis with constant indices", {}};
    int x = np.plan.tensor("x", {-1, 4}, "input");
    int i = np.plan.typed_weight<int64_t>("i", {2}, "int64", {0, 1});
    int y = np.plan.tensor("y", {-1, 4}, "output");
    np.plan.op("Gather", {x, i}, {y}, Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Concat along the batch axis", {}};
    int a = np.plan.tensor("a", {-1, 4}, "input"), c = np.plan.tensor("c", {-1, 4}, "input");
    int y = np.plan.tensor("y", {-2, 4}, "activation"), z = np.plan.tensor("z", {-1, 8}, "output");
    np.plan.op("Concat", {a, c}, {y}, Attrs{{"axis", int64_t(0)}});
    np.plan.op("Reshape", {y}, {z}, Attrs{{"shape", V{-1, 8}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Add of int64 and float32", {}};
    int a = np.plan.tensor("a", {-1, 4}, "input", "int64"), c = np.plan.tensor("c", {-1, 4}, "input");
    int y = np.plan.tensor("y", {-1, 4}, "output", "int64");
    np.plan.op("Add", {a, c}, {y});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Softmax over int64", {}};
    int a = np.plan.tensor("a", {-1, 4}, "input", "int64"), y = np.plan.tensor("y", {-1, 4}, "output", "int64");
    np.plan.op("Softmax", {a}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"Slice reading past the axis", {}};
    int x = np.plan.tensor("x", {-1, 6}, "input"), y = np.plan.tensor("y", {-1, 4}, "output");
    np.plan.op("Slice", {x}, {y}, Attrs{{"axes", V{1}}, {"starts", V{3}}, {"steps", V{1}}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"MaxPool with the batch on axis 1", {}};
    int x = np.plan.tensor("x", {2, -1, 4, 4}, "input"), y = np.plan.tensor("y", {2, -1, 2, 2}, "output");
    np.plan.op("MaxPool", {x}, {y}, Attrs{{"kernel", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{0, 0, 0, 0}}, {"dilations", V{1, 1}}});
    v.push_back(std::move(np));
  }
  return v;
}

}  // namespace cudatest
