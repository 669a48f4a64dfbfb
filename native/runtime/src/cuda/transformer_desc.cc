#include "transformer_desc.h"

#include <algorithm>

namespace memlane::cuda {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

}  // namespace

// MatMul over broadcast leading dims (cpu matmul_batched.cc's rules): both operands rank >= 2,
// at least one an activation; the batch sits in an activation's leading dims (at any of
// them, or in M), a weight has none (it broadcasts there, with fewer dims or a 1).
bool batched_desc(const Plan& plan, const Op& op, int64_t batch, BatchedMatMulDesc* d, std::string* why) {
  const TensorInfo& A = plan.tensors[op.inputs[0]];
  const TensorInfo& B = plan.tensors[op.inputs[1]];
  const TensorInfo& Y = plan.tensors[op.outputs[0]];
  const int r = static_cast<int>(Y.shape.size());
  if (A.shape.size() < 2 || B.shape.size() < 2 || r < 3 || r - 2 > kMaxRank || (A.is_weight() && B.is_weight())) {
    *why = "batched MatMul needs operands of rank >= 2 (output rank 3..8), one an activation; A " + shape_str(A.shape) +
           ", B " + shape_str(B.shape);
    return false;
  }
  d->lead = r - 2;
  // Shapes line up on the plan's dims (a batch dim -k only with the same -k); the strides
  // come from the dims resolved for the batch, wherever it sits outside the [M, K] x [K, N].
  if (B.shape[B.shape.size() - 2] != A.shape.back() || Y.shape[r - 2] != A.shape[A.shape.size() - 2] ||
      Y.shape[r - 1] != B.shape.back() || A.shape.back() < 0 || B.shape.back() < 0) {
    *why = "shapes do not line up: A " + shape_str(A.shape) + " x B " + shape_str(B.shape) + " -> Y " + shape_str(Y.shape);
    return false;
  }
  auto dims = [&](const TensorInfo& t) { return t.is_weight() ? t.shape : t.resolved(batch); };
  const std::vector<int64_t> as = dims(A), bs = dims(B), ys = dims(Y);
  d->M = as[as.size() - 2];
  d->K = as.back();
  d->N = bs.back();
  for (int i = 0; i < d->lead; ++i) d->dims[i] = ys[size_t(i)];
  auto strides = [&](const TensorInfo& t, const std::vector<int64_t>& ts, int64_t* s) {
    const int tr = static_cast<int>(t.shape.size()), tl = tr - 2;
    if (tl > d->lead || (!t.is_weight() && tl != d->lead)) return false;
    int64_t st = ts[size_t(tr - 2)] * ts[size_t(tr - 1)];
    for (int i = d->lead - 1; i >= 0; --i) {
      const int ti = i - (d->lead - tl);
      if (ti < 0) { s[i] = 0; continue; }
      const int64_t td = t.shape[size_t(ti)];
      if (td != Y.shape[size_t(i)] && td != 1) return false;
      s[i] = td == 1 ? 0 : st;
      st *= ts[size_t(ti)];
    }
    return true;
  };
  if (!strides(A, as, d->a_stride) || !strides(B, bs, d->b_stride)) {
    *why = "operands A " + shape_str(A.shape) + " and B " + shape_str(B.shape) + " do not broadcast to " + shape_str(Y.shape);
    return false;
  }
  return true;
}

// The fused Attention op (cpu attention.cc's rules): Q, Kt, V, Y activations of one rank with
// equal leading dims; an optional mask broadcasting to the scores [lead..., S, T].
bool attention_desc(const Plan& plan, const Op& op, int64_t batch, AttentionDesc* d, std::string* why) {
  if (op.inputs.size() < 3 || op.inputs.size() > 4 || op.inputs[1] < 0 || op.inputs[2] < 0) {
    *why = "expects Q, Kt, V and an optional mask";
    return false;
  }
  const TensorInfo &Q = plan.tensors[op.inputs[0]], &KT = plan.tensors[op.inputs[1]], &V = plan.tensors[op.inputs[2]];
  const TensorInfo& Y = plan.tensors[op.outputs[0]];
  const size_t r = Q.shape.size();
  auto lead_eq = [&](const TensorInfo& t) {
    return !t.is_weight() && t.shape.size() == r && std::equal(t.shape.begin(), t.shape.end() - 2, Q.shape.begin());
  };
  if (Q.is_weight() || r < 3 || r - 2 > size_t(kMaxRank) || !lead_eq(KT) || !lead_eq(V) || !lead_eq(Y)) {
    *why = "needs activations Q, Kt, V, Y of one rank (3..8) with equal leading dims; Q " + shape_str(Q.shape);
    return false;
  }
  d->lead = static_cast<int>(r - 2);
  d->S = Q.shape[r - 2]; d->d = Q.shape[r - 1]; d->T = KT.shape[r - 1]; d->dv = V.shape[r - 1];
  d->scale = op.attrs.scale;
  if (KT.shape[r - 2] != d->d || V.shape[r - 2] != d->T || Y.shape[r - 2] != d->S || Y.shape[r - 1] != d->dv) {
    *why = "shapes do not line up: Q " + shape_str(Q.shape) + ", Kt " + shape_str(KT.shape) + ", V " + shape_str(V.shape);
    return false;
  }
  if (d->T > kAttentionMaxT) {
    *why = "key length " + std::to_string(d->T) + " above the kernel's " + std::to_string(kAttentionMaxT);
    return false;
  }
  d->dims[0] = batch;
  for (int i = 1; i < d->lead; ++i) d->dims[i] = Q.shape[size_t(i)];
  if (op.inputs.size() == 4 && op.inputs[3] != kAbsentInput) {
    const TensorInfo& M = plan.tensors[op.inputs[3]];
    const int mr = static_cast<int>(M.shape.size()), full = static_cast<int>(r);
    if (mr > full || (!M.is_weight() && mr != full)) {
      *why = "mask " + shape_str(M.shape) + " does not broadcast to the scores";
      return false;
    }
    int64_t st = 1, strides[kMaxRank + 2] = {};
    for (int i = full - 1; i >= 0; --i) {
      const int mi = i - (full - mr);
      if (mi < 0) continue;
      const int64_t md = M.shape[size_t(mi)];
      if (i == 0 && !M.is_weight()) { strides[0] = st; continue; }
      const int64_t want = i == full - 1 ? d->T : i == full - 2 ? d->S : i == 0 ? -1 : Q.shape[size_t(i)];
      if (md != 1 && md != want) {
        *why = "mask " + shape_str(M.shape) + " does not broadcast to the scores";
        return false;
      }
      strides[i] = md == 1 ? 0 : st;
      st *= md;
    }
    for (int i = 0; i < d->lead; ++i) d->mask_stride[i] = strides[i];
    d->mask_row = strides[full - 2];
    d->mask_col = strides[full - 1];
  }
  return true;
}

}  // namespace memlane::cuda
