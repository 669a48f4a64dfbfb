// Add, Sub, Mul, Div with numpy broadcasting. Strides are resolved at build time (0 on a
// broadcast dimension); at run time adjacent dimensions that stay contiguous are merged
// so that the inner loop is as long as possible and branch-free.
#include <algorithm>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

constexpr int kMaxRank = 8;

struct AddF { static float f(float a, float b) { return a + b; } };
struct SubF { static float f(float a, float b) { return a - b; } };
struct MulF { static float f(float a, float b) { return a * b; } };
struct DivF { static float f(float a, float b) { return a / b; } };

template <typename F>
void inner(float* y, const float* a, const float* b, int64_t n, int64_t sa, int64_t sb) {
  if (sa == 1 && sb == 1)
    for (int64_t i = 0; i < n; ++i) y[i] = F::f(a[i], b[i]);
  else if (sa == 1) {
    const float bv = b[0];
    for (int64_t i = 0; i < n; ++i) y[i] = F::f(a[i], bv);
  } else if (sb == 1) {
    const float av = a[0];
    for (int64_t i = 0; i < n; ++i) y[i] = F::f(av, b[i]);
  } else {
    const float v = F::f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

class BinaryKernel final : public Kernel {
 public:
  OpType type = OpType::kAdd;
  TensorRef a, b, y;
  int rank = 0;
  int64_t dims[kMaxRank] = {};  // dims[0] is the batch, filled at run time
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};

  void run(const RunCtx& c) const override {
    switch (type) {
      case OpType::kAdd: go<AddF>(c); break;
      case OpType::kSub: go<SubF>(c); break;
      case OpType::kMul: go<MulF>(c); break;
      default: go<DivF>(c); break;
    }
  }

  template <typename F>
  void go(const RunCtx& c) const {
    // Merge dims (output is contiguous; an input merges where it is contiguous or broadcast in both).
    int64_t d[kMaxRank], xa[kMaxRank], xb[kMaxRank];
    int k = 0;
    for (int i = 0; i < rank; ++i) {
      const int64_t di = i == 0 ? c.batch : dims[i];
      if (di == 1) continue;  // size-1 dims carry nothing
      if (k > 0) {
        const bool ma = (xa[k - 1] == 0 && sa[i] == 0) || (sa[i] != 0 && xa[k - 1] == sa[i] * di);
        const bool mb = (xb[k - 1] == 0 && sb[i] == 0) || (sb[i] != 0 && xb[k - 1] == sb[i] * di);
        if (ma && mb) {
          d[k - 1] *= di;
          xa[k - 1] = sa[i];
          xb[k - 1] = sb[i];
          continue;
        }
      }
      d[k] = di;
      xa[k] = sa[i];
      xb[k] = sb[i];
      ++k;
    }
    const float* A = a.at(c);
    const float* B = b.at(c);
    float* Y = y.at(c);
    if (k == 0) {
      Y[0] = F::f(A[0], B[0]);
      return;
    }
    const int64_t L = d[k - 1], ia = xa[k - 1], ib = xb[k - 1];
    int64_t outer = 1;
    for (int i = 0; i < k - 1; ++i) outer *= d[i];
    auto body = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t rem = r, oa = 0, ob = 0;
        for (int i = k - 2; i >= 0; --i) {
          const int64_t q = rem % d[i];
          rem /= d[i];
          oa += q * xa[i];
          ob += q * xb[i];
        }
        inner<F>(Y + r * L, A + oa, B + ob, L, ia, ib);
      }
    };
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(L, 1));
    c.pool->parallel_for(outer, grain, body);
  }
};

// Element strides of input `t` against output dims of rank r (right-aligned, 0 = broadcast).
bool strides_for(const TensorInfo& t, const std::vector<int64_t>& yshape, int64_t* s, std::string* why) {
  const int r = int(yshape.size());
  const int tr = int(t.shape.size());
  if (!t.is_weight() && tr != r) {
    *why = "an activation input must have the output's rank; got " + shape_str(t.shape) + " for output " + shape_str(yshape);
    return false;
  }
  if (tr > r) {
    *why = "input " + shape_str(t.shape) + " has a higher rank than the output " + shape_str(yshape);
    return false;
  }
  int64_t stride = 1;
  for (int i = r - 1; i >= 0; --i) {
    const int ti = i - (r - tr);
    if (ti < 0) { s[i] = 0; continue; }
    int64_t td = t.shape[ti];
    if (i == 0) {
      // batch dimension: activations run along it, weights must be 1 there
      if (t.is_weight() && td != 1) { *why = "weight " + shape_str(t.shape) + " spans the batch dimension"; return false; }
      s[i] = t.is_weight() ? 0 : stride;
      continue;
    }
    if (td != yshape[i] && td != 1) {
      *why = "input " + shape_str(t.shape) + " does not broadcast to " + shape_str(yshape);
      return false;
    }
    s[i] = td == 1 ? 0 : stride;
    stride *= td;
  }
  return true;
}

}  // namespace

std::unique_ptr<Kernel> make_binary(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 2, st, msg)) return nullptr;
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (Y.shape.size() > size_t(kMaxRank)) return unsupported(op, "rank above 8", st, msg);
  auto k = std::make_unique<BinaryKernel>();
  k->type = op.type;
  k->rank = int(Y.shape.size());
  for (int i = 1; i < k->rank; ++i) k->dims[i] = Y.shape[i];
  std::string why;
  if (!strides_for(bc.info(op.inputs[0]), Y.shape, k->sa, &why) ||
      !strides_for(bc.info(op.inputs[1]), Y.shape, k->sb, &why))
    return unsupported(op, why, st, msg);
  k->a = bc.ref(op.inputs[0]);
  k->b = bc.ref(op.inputs[1]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
