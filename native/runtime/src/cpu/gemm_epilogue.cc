// Which MatMul can write its bias Add (and the Gelu after it) itself: transformers' dense
// layers are MatMul(x, W) -> Add(bias) [-> Gelu], three passes over the activation where the
// product's own registers could take the bias and the activation on the way out.
#include <cstdlib>

#include "cpu/kernel.h"
#include "cpu/plan_queries.h"

namespace memlane::cpu {
namespace {

// A weight of n floats shaped [n] or [1, ..., 1, n].
bool is_row_weight(const TensorInfo& t, int64_t n) {
  if (!t.is_weight() || t.dtype != DType::kFloat32 || t.shape.empty() || t.shape.back() != n) return false;
  return t.elements() == n;
}

}  // namespace

// Only adjacent ops (as the Conv residual epilogue): a tensor alive in between could share the
// output's arena space. The output must not overlap the MatMul's input, which the product
// reads while it writes.
bool gemm_epilogue(const Plan& plan, size_t i, GemmEpilogue* e) {
  const auto& ops = plan.ops;
  if (std::getenv("MEMLANE_NO_FUSION")) return false;  // the unfused ops, for tests and A/B timing
  if (i + 1 >= ops.size() || ops[i].type != OpType::kMatMul || ops[i].inputs.size() != 2 ||
      ops[i].outputs.size() != 1)
    return false;
  const TensorInfo& A = plan.tensors[size_t(ops[i].inputs[0])];
  const TensorInfo& W = plan.tensors[size_t(ops[i].inputs[1])];
  if (A.is_weight() || !W.is_weight() || W.shape.size() != 2) return false;
  const int64_t N = W.shape[1];
  const int32_t t1 = ops[i].outputs[0];
  const Op& add = ops[i + 1];
  if (add.type != OpType::kAdd || add.inputs.size() != 2 || add.outputs.size() != 1) return false;
  if ((add.inputs[0] == t1) == (add.inputs[1] == t1)) return false;  // exactly one side
  const TensorInfo& B = plan.tensors[size_t(add.inputs[0] == t1 ? add.inputs[1] : add.inputs[0])];
  if (!is_row_weight(B, N) || read_elsewhere(plan, t1, i + 1)) return false;
  int32_t out = add.outputs[0];
  bool gelu = false, gelu_tanh = false;
  if (i + 2 < ops.size() && ops[i + 2].type == OpType::kGelu && ops[i + 2].inputs.size() == 1 &&
      ops[i + 2].inputs[0] == out && ops[i + 2].outputs.size() == 1 && !read_elsewhere(plan, out, i + 2)) {
    out = ops[i + 2].outputs[0];
    gelu = true;
    gelu_tanh = ops[i + 2].attrs.geluTanh;
  }
  const TensorInfo &T = plan.tensors[size_t(t1)], &O = plan.tensors[size_t(out)];
  if (O.is_weight() || O.dtype != DType::kFloat32 || O.shape != T.shape || overlaps(O, A)) return false;
  e->bias = B.data;
  e->output = out;
  e->gelu = gelu;
  e->gelu_tanh = gelu_tanh;
  e->skip = gelu ? 2 : 1;
  return true;
}

}  // namespace memlane::cpu
