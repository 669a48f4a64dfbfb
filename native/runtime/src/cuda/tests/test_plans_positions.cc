// Plans for CumSum and GatherElements (RoBERTa-family position ids and token types) on the
// CUDA backend, each compared with the CPU backend by cuda_vs_cpu on a GPU and validated by
// cuda_host_checks: every flag of CumSum on float32, int64 and int32, the batch off axis 0 and
// along the batch axis (where the CPU backend runs the batch whole); GatherElements from an
// activation, a weight, a bool tensor and along the batch axis, negative indices included.
#include <cstdint>

#include "test_plans.h"

namespace cudatest {
namespace {

using mltest::Attrs;
using mltest::PlanBuilder;

Attrs cumsum_attrs(int64_t axis, bool exclusive, bool reverse) {
  return {{"axis", axis}, {"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}};
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7 % 11) - 5);
  return v;
}

}  // namespace

std::vector<NamedPlan> position_plans() {
  std::vector<NamedPlan> v;
  for (int flags = 0; flags < 4; ++flags) {
    const bool ex = flags & 1, rev = flags & 2;
    NamedPlan np{std::string("CumSum float32 [n,5,3] axis 1") + (ex ? " exclusive" : "") + (rev ? " reverse" : ""), {}};
    int x = np.plan.tensor("x", {-1, 5, 3}, "input"), y = np.plan.tensor("y", {-1, 5, 3}, "output");
    np.plan.op("CumSum", {x}, {y}, cumsum_attrs(1, ex, rev));
    v.push_back(std::move(np));
  }
  {  // RoBERTa: cumsum(int32 mask) along the sequence, then int64 sums with both flags
    NamedPlan np{"CumSum int32 mask [n,6] axis 1, int64 [n,4] exclusive reverse", {}};
    np.intLo = -50;
    np.intHi = 50;
    PlanBuilder& b = np.plan;
    int m = b.tensor("m", {-1, 6}, "input", "int32"), p = b.tensor("p", {-1, 6}, "output", "int32");
    int x = b.tensor("x", {-1, 4}, "input", "int64"), y = b.tensor("y", {-1, 4}, "output", "int64");
    b.op("CumSum", {m}, {p}, cumsum_attrs(1, false, false));
    b.op("CumSum", {x}, {y}, cumsum_attrs(1, true, true));
    v.push_back(std::move(np));
  }
  {  // seq-first: along the sequence (axis 0) and along the batch itself (axis 1)
    NamedPlan np{"CumSum int64 [3,n,2] axis 0, float32 along the batch axis 1", {}};
    np.intLo = -9;
    np.intHi = 9;
    PlanBuilder& b = np.plan;
    int x = b.tensor("x", {3, -1, 2}, "input", "int64"), y = b.tensor("y", {3, -1, 2}, "output", "int64");
    int f = b.tensor("f", {3, -1, 2}, "input"), g = b.tensor("g", {3, -1, 2}, "output");
    b.op("CumSum", {x}, {y}, cumsum_attrs(0, false, true));
    b.op("CumSum", {f}, {g}, cumsum_attrs(1, false, false));
    v.push_back(std::move(np));
  }
  {  // transformers' token types: a [n, 6] buffer read at [n, 4] positions, negative ones too
    NamedPlan np{"GatherElements int64 [n,6] at int64 [n,4] axis 1", {}};
    np.intLo = -6;
    np.intHi = 5;
    PlanBuilder& b = np.plan;
    int d = b.tensor("d", {-1, 6}, "input", "int64"), i = b.tensor("i", {-1, 4}, "input", "int64");
    int y = b.tensor("y", {-1, 4}, "output", "int64");
    b.op("GatherElements", {d, i}, {y}, Attrs{{"axis", int64_t(1)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"GatherElements weight [4,3] by int32 [n,3] axis 0", {}};
    np.intLo = -4;
    np.intHi = 3;
    PlanBuilder& b = np.plan;
    int w = b.weight("w", {4, 3}, ramp(12, 0.25f));
    int i = b.tensor("i", {-1, 3}, "input", "int32"), y = b.tensor("y", {-1, 3}, "output");
    b.op("GatherElements", {w, i}, {y}, Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(np));
  }
  {  // indices smaller than the data off the axis; bool data
    NamedPlan np{"GatherElements bool [n,4,3] at int64 [n,2,3] axis 2", {}};
    np.intLo = -3;
    np.intHi = 2;
    PlanBuilder& b = np.plan;
    int d = b.tensor("d", {-1, 4, 3}, "input", "bool"), i = b.tensor("i", {-1, 2, 3}, "input", "int64");
    int y = b.tensor("y", {-1, 2, 3}, "output", "bool");
    b.op("GatherElements", {d, i}, {y}, Attrs{{"axis", int64_t(2)}});
    v.push_back(std::move(np));
  }
  {  // sample numbers -1 and 0: valid at every batch
    NamedPlan np{"GatherElements float32 [n,2] along the batch axis by int64 [n,2]", {}};
    np.intLo = -1;
    np.intHi = 0;
    PlanBuilder& b = np.plan;
    int d = b.tensor("d", {-1, 2}, "input"), i = b.tensor("i", {-1, 2}, "input", "int64");
    int y = b.tensor("y", {-1, 2}, "output");
    b.op("GatherElements", {d, i}, {y}, Attrs{{"axis", int64_t(0)}});
    v.push_back(std::move(np));
  }
  return v;
}

std::vector<NamedPlan> position_rejected_plans() {
  std::vector<NamedPlan> v;
  {
    NamedPlan np{"GatherElements indices larger than the data off the axis", {}};
    int d = np.plan.tensor("d", {-1, 2, 3}, "input"), i = np.plan.tensor("i", {-1, 3, 3}, "input", "int64");
    int y = np.plan.tensor("y", {-1, 3, 3}, "output");
    np.plan.op("GatherElements", {d, i}, {y}, Attrs{{"axis", int64_t(2)}});
    v.push_back(std::move(np));
  }
  {
    NamedPlan np{"CumSum of bool", {}};
    int x = np.plan.tensor("x", {-1, 4}, "input", "bool"), y = np.plan.tensor("y", {-1, 4}, "output", "bool");
    np.plan.op("CumSum", {x}, {y}, cumsum_attrs(1, false, false));
    v.push_back(std::move(np));
  }
  return v;
}

}  // namespace cudatest
