// Elementwise activations: Relu, LeakyRelu, Sigmoid, Tanh, Erf, Gelu (exact and tanh).
#include <cmath>

#include "cpu/kernel.h"
#include "cpu/simd/avx512.h"
#include "cpu/vmath.h"

namespace memlane::cpu {
namespace {

class UnaryKernel final : public Kernel {
 public:
  OpType type = OpType::kRelu;
  TensorRef x, y;
  int64_t per_sample = 0;
  float alpha = 0.01f;
  bool gelu_tanh = false;

  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t n = per_sample * c.batch;
    const int64_t grain = (type == OpType::kRelu || type == OpType::kLeakyRelu) ? 65536 : 8192;
    c.pool->parallel_for(n, grain, [&](int64_t b, int64_t e) { apply(X + b, Y + b, e - b); });
  }

  void apply(const float* X, float* Y, int64_t n) const {
    switch (type) {
      case OpType::kRelu:
        for (int64_t i = 0; i < n; ++i) Y[i] = X[i] > 0.f ? X[i] : 0.f;
        break;
      case OpType::kLeakyRelu: {
        const float a = alpha;
        for (int64_t i = 0; i < n; ++i) Y[i] = X[i] >= 0.f ? X[i] : a * X[i];
        break;
      }
      case OpType::kSigmoid: vmath::sigmoid(X, Y, n); break;
      case OpType::kTanh: vmath::tanh(X, Y, n); break;
      case OpType::kErf: vmath::erf(X, Y, n); break;
      case OpType::kGelu:
        if (simd::have_avx512()) gelu_tanh ? simd::gelu_tanh(X, Y, n) : simd::gelu(X, Y, n);
        else if (gelu_tanh) vmath::gelu_tanh(X, Y, n);
        else vmath::gelu(X, Y, n);
        break;
      default:
        break;
    }
  }
};

}  // namespace

std::unique_ptr<Kernel> make_unary(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight()) return unsupported(op, "input must be an activation", st, msg);
  if (X.elements() != Y.elements())
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ", st, msg);
  auto k = std::make_unique<UnaryKernel>();
  k->type = op.type;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->per_sample = X.elements();
  k->alpha = op.attrs.alpha;
  k->gelu_tanh = op.attrs.geluTanh;
  return k;
}

}  // namespace memlane::cpu
