// Reductions: adjacent axes that are both kept or both reduced are merged first, so the
// common cases become one of two loops: a trailing reduction (rows: x.mean(-1) in a
// LayerNorm) reduces each contiguous row; anything else walks x once in order and
// accumulates into its output element (y is small and stays in cache).
#include "cpu/reduce.h"

#include <algorithm>
#include <cfloat>
#include <memory>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

float reduce_row(ReduceKind k, const float* x, int64_t n) {
  constexpr int kLanes = 8;
  float acc[kLanes];
  const float init = k == ReduceKind::kMax ? -FLT_MAX : 0.f;
  for (float& a : acc) a = init;
  int64_t i = 0;
  if (k == ReduceKind::kMax) {
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] = std::max(acc[l], x[i + l]);
    float m = init;
    for (; i < n; ++i) m = std::max(m, x[i]);
    for (float a : acc) m = std::max(m, a);
    return m;
  }
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  float s = 0.f;
  for (; i < n; ++i) s += x[i];
  for (float a : acc) s += a;
  return k == ReduceKind::kMean ? s / float(n) : s;
}

}  // namespace

void reduce_axes(ReduceKind k, const float* x, float* y, const int64_t* dims, const bool* reduced, int rank) {
  int64_t d[kReduceMaxRank];
  bool red[kReduceMaxRank];
  int r = 0;
  int64_t count = 1, total = 1;
  for (int i = 0; i < rank; ++i) {
    total *= dims[i];
    if (reduced[i]) count *= dims[i];
    if (dims[i] == 1) continue;  // carries nothing either way
    if (r > 0 && red[r - 1] == reduced[i]) {
      d[r - 1] *= dims[i];
      continue;
    }
    d[r] = dims[i];
    red[r++] = reduced[i];
  }
  if (r == 0 || (r == 1 && !red[0])) {  // nothing reduced: a copy
    std::copy(x, x + total, y);
    return;
  }
  if (red[r - 1] && (r == 1 || (r == 2 && !red[0]))) {  // [outer, n] -> [outer]
    const int64_t n = d[r - 1], outer = r == 2 ? d[0] : 1;
    for (int64_t o = 0; o < outer; ++o) y[o] = reduce_row(k, x + o * n, n);
    return;
  }
  // General: output strides of the kept merged dims, walk x in order.
  int64_t ostride[kReduceMaxRank];
  int64_t os = 1;
  for (int i = r - 1; i >= 0; --i) {
    ostride[i] = red[i] ? 0 : os;
    if (!red[i]) os *= d[i];
  }
  std::fill(y, y + os, k == ReduceKind::kMax ? -FLT_MAX : 0.f);
  const int64_t inner = d[r - 1], istride = ostride[r - 1];
  int64_t coord[kReduceMaxRank] = {};
  for (int64_t base = 0; base < total; base += inner) {
    int64_t off = 0;
    for (int i = 0; i < r - 1; ++i) off += coord[i] * ostride[i];
    const float* xr = x + base;
    float* yr = y + off;
    if (k == ReduceKind::kMax)
      for (int64_t j = 0; j < inner; ++j) yr[j * istride] = std::max(yr[j * istride], xr[j]);
    else
      for (int64_t j = 0; j < inner; ++j) yr[j * istride] += xr[j];
    for (int i = r - 2; i >= 0; --i) {
      if (++coord[i] < d[i]) break;
      coord[i] = 0;
    }
  }
  if (k == ReduceKind::kMean) {
    const float inv = 1.f / float(count);
    for (int64_t i = 0; i < os; ++i) y[i] *= inv;
  }
}

namespace {

class ReduceKernel final : public Kernel {
 public:
  ReduceKind kind = ReduceKind::kMean;
  TensorRef x, y;
  int rank = 0;
  int64_t dims[kReduceMaxRank] = {};  // dims[0] is the batch, set per run
  bool reduced[kReduceMaxRank] = {};
  int64_t in_per_sample = 0, out_per_sample = 0;
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    // Samples are independent (the batch axis is never reduced): one task a sample.
    c.pool->parallel_for(c.batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        reduce_axes(kind, X + b * in_per_sample, Y + b * out_per_sample, dims + 1, reduced + 1, rank - 1);
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_reduce(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const int r = int(X.shape.size());
  if (X.is_weight() || r < 2 || r > kReduceMaxRank)
    return unsupported(op, "needs an activation of rank 2..8, found " + shape_str(X.shape), st, msg);
  auto k = std::make_unique<ReduceKernel>();
  k->kind = op.type == OpType::kReduceMax ? ReduceKind::kMax : op.type == OpType::kReduceSum ? ReduceKind::kSum
                                                                                            : ReduceKind::kMean;
  k->rank = r;
  int64_t out = 1;
  for (int i = 0; i < r; ++i) k->dims[i] = X.shape[i];
  for (int a : op.attrs.axes) {
    if (a < 1 || a >= r) return unsupported(op, "axis " + std::to_string(a) + " out of range for " + shape_str(X.shape), st, msg);
    k->reduced[a] = true;
  }
  for (int i = 1; i < r; ++i)
    if (!k->reduced[i]) out *= X.shape[i];
  if (Y.elements() != out)
    return unsupported(op, "output " + shape_str(Y.shape) + " does not hold " + shape_str(X.shape) + " reduced", st, msg);
  k->in_per_sample = X.elements();
  k->out_per_sample = out;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
