// Two-input element-wise ops with numpy broadcasting (broadcast.h), on any plan dtype:
// Add, Sub, Mul, Div, Mod, Max, Min on float32/int64/int32; PRelu on float32; Equal, Less, Greater -> bool; And, Or on
// bool. The loop over merged rows is branch-free inside, so contiguous rows vectorise.
#include <cmath>
#include <type_traits>

#include "cpu/broadcast.h"

namespace memlane::cpu {
namespace {

// Integer division never traps: x / 0 gives 0 (ONNX leaves it undefined), INT_MIN / -1 wraps.
template <typename T>
T idiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a / b;
  else return b == 0 ? T(0) : b == T(-1) ? T(0) - a : a / b;
}
template <typename T>
T imod(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b);
  else {
    if (b == 0 || b == T(-1)) return 0;
    const T r = a % b;
    return !fmod && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;  // fmod = 0: the divisor's sign
  }
}

struct AddF { template <typename T> static T f(T a, T b, bool) { return a + b; } };
struct SubF { template <typename T> static T f(T a, T b, bool) { return a - b; } };
struct MulF { template <typename T> static T f(T a, T b, bool) { return a * b; } };
struct DivF { template <typename T> static T f(T a, T b, bool) { return idiv(a, b); } };
struct ModF { template <typename T> static T f(T a, T b, bool fm) { return imod(a, b, fm); } };
struct EqF { template <typename T> static uint8_t f(T a, T b, bool) { return a == b; } };
struct LtF { template <typename T> static uint8_t f(T a, T b, bool) { return a < b; } };
struct GtF { template <typename T> static uint8_t f(T a, T b, bool) { return a > b; } };
struct LeF { template <typename T> static uint8_t f(T a, T b, bool) { return a <= b; } };
struct GeF { template <typename T> static uint8_t f(T a, T b, bool) { return a >= b; } };
struct AndF { template <typename T> static uint8_t f(T a, T b, bool) { return a && b; } };
struct OrF { template <typename T> static uint8_t f(T a, T b, bool) { return a || b; } };
// ONNX Max/Min propagate a NaN operand (std::max would return the other one).
struct MaxF { template <typename T> static T f(T a, T b, bool) { return a != a ? a : b != b ? b : a < b ? b : a; } };
struct MinF { template <typename T> static T f(T a, T b, bool) { return a != a ? a : b != b ? b : b < a ? b : a; } };
// PRelu: x, or x times its slope (b, broadcast onto x) where x is negative.
struct PReluF { template <typename T> static T f(T a, T b, bool) { return a < T(0) ? a * b : a; } };

template <typename F, typename T, typename Y>
void inner(Y* y, const T* a, const T* b, int64_t n, int64_t sa, int64_t sb, bool flag) {
  if (sa == 1 && sb == 1)
    for (int64_t i = 0; i < n; ++i) y[i] = F::f(a[i], b[i], flag);
  else if (sa == 1) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) y[i] = F::f(a[i], bv, flag);
  } else if (sb == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) y[i] = F::f(av, b[i], flag);
  } else {
    const Y v = F::f(a[0], b[0], flag);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

template <typename F, typename T, typename Y>
class BinaryKernel final : public Kernel {
 public:
  Broadcast bc;
  TensorRef a, b, y;
  bool flag = false;  // Mod: fmod
  void run(const RunCtx& c) const override {
    const BroadcastLoop L = bc.resolve(c.batch);
    const T* A = a.as<T>(c);
    const T* B = b.as<T>(c);
    Y* Yp = y.as<Y>(c);
    const int64_t ia = L.rank ? L.s[0][L.rank - 1] : 0, ib = L.rank ? L.s[1][L.rank - 1] : 0;
    for_each_row(c, L, 2, [&](int64_t r, const int64_t* off, int64_t len) {
      inner<F, T, Y>(Yp + r * len, A + off[0], B + off[1], len, ia, ib, flag);
    });
  }
};

template <typename F, typename T, typename Y>
std::unique_ptr<Kernel> make(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  auto k = std::make_unique<BinaryKernel<F, T, Y>>();
  std::string why;
  if (!k->bc.init(bc.info(op.outputs[0]), {&bc.info(op.inputs[0]), &bc.info(op.inputs[1])}, &why))
    return unsupported(op, why, st, msg);
  k->a = bc.ref(op.inputs[0]);
  k->b = bc.ref(op.inputs[1]);
  k->y = bc.ref(op.outputs[0]);
  k->flag = op.attrs.fmod;
  return k;
}

// Arithmetic: the output has the inputs' dtype.
template <typename F>
std::unique_ptr<Kernel> arith(const BuildCtx& bc, const Op& op, DType t, Status* st, std::string* msg) {
  switch (t) {
    case DType::kFloat32: return make<F, float, float>(bc, op, st, msg);
    case DType::kInt64: return make<F, int64_t, int64_t>(bc, op, st, msg);
    case DType::kInt32: return make<F, int32_t, int32_t>(bc, op, st, msg);
    default: return unsupported(op, std::string("no ") + dtype_name(t) + " arithmetic", st, msg);
  }
}

// Comparisons and logic: bool (uint8) out.
template <typename F>
std::unique_ptr<Kernel> predicate(const BuildCtx& bc, const Op& op, DType t, Status* st, std::string* msg) {
  switch (t) {
    case DType::kFloat32: return make<F, float, uint8_t>(bc, op, st, msg);
    case DType::kInt64: return make<F, int64_t, uint8_t>(bc, op, st, msg);
    case DType::kInt32: return make<F, int32_t, uint8_t>(bc, op, st, msg);
    default: return make<F, uint8_t, uint8_t>(bc, op, st, msg);
  }
}

}  // namespace

std::unique_ptr<Kernel> make_binary(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 2, st, msg)) return nullptr;
  const DType t = bc.info(op.inputs[0]).dtype, yt = bc.info(op.outputs[0]).dtype;
  if (bc.info(op.inputs[1]).dtype != t)
    return unsupported(op, std::string("inputs differ in dtype: ") + dtype_name(t) + " and " + dtype_name(bc.info(op.inputs[1]).dtype), st, msg);
  const bool order = op.type == OpType::kLess || op.type == OpType::kGreater || op.type == OpType::kLessOrEqual ||
                     op.type == OpType::kGreaterOrEqual;
  const bool pred = order || op.type == OpType::kEqual || op.type == OpType::kAnd || op.type == OpType::kOr;
  if (pred ? yt != DType::kBool : yt != t)
    return unsupported(op, std::string("output dtype ") + dtype_name(yt) + " does not fit inputs of " + dtype_name(t), st, msg);
  if ((op.type == OpType::kAnd || op.type == OpType::kOr) && t != DType::kBool) return unsupported(op, "And/Or take bool", st, msg);
  if (order && t == DType::kBool) return unsupported(op, "no bool ordering", st, msg);
  switch (op.type) {
    case OpType::kAdd: return arith<AddF>(bc, op, t, st, msg);
    case OpType::kSub: return arith<SubF>(bc, op, t, st, msg);
    case OpType::kMul: return arith<MulF>(bc, op, t, st, msg);
    case OpType::kDiv: return arith<DivF>(bc, op, t, st, msg);
    case OpType::kMod: return arith<ModF>(bc, op, t, st, msg);
    case OpType::kEqual: return predicate<EqF>(bc, op, t, st, msg);
    case OpType::kLess: return predicate<LtF>(bc, op, t, st, msg);
    case OpType::kGreater: return predicate<GtF>(bc, op, t, st, msg);
    case OpType::kLessOrEqual: return predicate<LeF>(bc, op, t, st, msg);
    case OpType::kGreaterOrEqual: return predicate<GeF>(bc, op, t, st, msg);
    case OpType::kAnd: return predicate<AndF>(bc, op, t, st, msg);
    case OpType::kOr: return predicate<OrF>(bc, op, t, st, msg);
    case OpType::kMax: return arith<MaxF>(bc, op, t, st, msg);
    case OpType::kPRelu:
      if (t != DType::kFloat32) return unsupported(op, std::string("PRelu computes on float32, not ") + dtype_name(t), st, msg);
      return make<PReluF, float, float>(bc, op, st, msg);
    case OpType::kMin: return arith<MinF>(bc, op, t, st, msg);
    default: return unsupported(op, "not a binary op", st, msg);
  }
}

}  // namespace memlane::cpu
