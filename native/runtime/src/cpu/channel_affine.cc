// A BatchNormalization the compiler could not fold into a Conv (rewrite.ts: its input comes from
// a Concat, an Add, a graph input) reaches the plan as Mul(x, scale) -> Add(., shift), per-channel
// weights [C, 1, ...], and is usually followed by a Relu: DenseNet's pre-activation layers
// (norm1 -> relu1 before each 1x1 conv, over the growing concatenation), pre-activation ResNets.
// Run as three kernels, that is three passes over the tensor; fused here into one:
// y = x * scale[c] + shift[c], then max(y, 0) with the Relu. ONNX Runtime does the same (its NCHWc
// transformer turns the BatchNormalization into a 1x1 depthwise conv with the Relu fused).
// densenet121 at batch 1, 1 thread: the three ops summed 10.4 ms of per-op minima a request.
#include <algorithm>
#include <cstdlib>

#include "cpu/kernel.h"
#include "cpu/plan_queries.h"

namespace memlane::cpu {
namespace {

// The channel a per-channel weight broadcasts along in a [batch, C, ...] tensor: its shape is
// [C, 1, ...] (or [1, C, 1, ...]) aligned to x's trailing axes with C on x's axis 1.
bool per_channel(const TensorInfo& w, const TensorInfo& x) {
  if (!w.is_weight() || w.dtype != DType::kFloat32 || w.shape.empty() || w.shape.size() > x.shape.size()) return false;
  const size_t lead = x.shape.size() - w.shape.size();  // x's axes left of w's first
  if (lead > 1) return false;                           // w would not reach the channel axis
  for (size_t j = 0; j < w.shape.size(); ++j)
    if (w.shape[j] != (lead + j == 1 ? x.shape[1] : 1)) return false;
  return true;
}

// The Mul's other input when one side is the activation x and the other a per-channel weight.
int32_t weight_side(const Plan& plan, const Op& op, int32_t x) {
  if (op.inputs.size() != 2 || op.outputs.size() != 1) return -1;
  if ((op.inputs[0] == x) == (op.inputs[1] == x)) return -1;
  const int32_t w = op.inputs[0] == x ? op.inputs[1] : op.inputs[0];
  return per_channel(plan.tensors[w], plan.tensors[x]) ? w : -1;
}

class ChannelAffineKernel final : public Kernel {
 public:
  TensorRef x, y;
  const float* scale = nullptr;
  const float* shift = nullptr;
  int64_t C = 0, P = 0;  // channels, elements a channel (a sample)
  bool relu = false;

  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int64_t rows = c.batch * C;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1));
    c.pool->parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float s = scale[r % C], b = shift[r % C];
        const float* xs = X + r * P;
        float* ys = Y + r * P;
        // (branch-free bodies: both loops vectorise; y may be x itself, read before written)
        if (relu)
          for (int64_t i = 0; i < P; ++i) ys[i] = std::max(xs[i] * s + b, 0.f);
        else
          for (int64_t i = 0; i < P; ++i) ys[i] = xs[i] * s + b;
      }
    });
  }
  const char* path() const override { return relu ? "channel_affine_relu" : "channel_affine"; }
};

}  // namespace

bool channel_affine_chain(const Plan& plan, size_t i, ChannelAffine* a) {
  if (std::getenv("MEMLANE_NO_FUSION")) return false;  // the unfused ops, for tests and A/B timing
  const auto& ops = plan.ops;
  if (i + 1 >= ops.size() || ops[i].type != OpType::kMul || ops[i].inputs.size() != 2) return false;
  // x: the Mul's activation input, float32, batch first, channels on axis 1
  int32_t x = -1;
  for (int32_t in : ops[i].inputs)
    if (!plan.tensors[in].is_weight()) x = in;
  if (x < 0) return false;
  const TensorInfo& X = plan.tensors[x];
  if (X.dtype != DType::kFloat32 || !X.batch_first() || X.shape.size() < 2 || X.shape[1] < 1) return false;
  const int32_t scale = weight_side(plan, ops[i], x);
  const int32_t mid = ops[i].outputs.empty() ? -1 : ops[i].outputs[0];
  if (scale < 0 || mid < 0 || read_elsewhere(plan, mid, i + 1)) return false;
  const Op& add = ops[i + 1];
  if (add.type != OpType::kAdd) return false;
  const int32_t shift = weight_side(plan, add, mid);
  if (shift < 0) return false;
  const int32_t relu_out = trailing_relu(plan, i + 2, add.outputs[0]);
  const bool relu = relu_out >= 0;
  const int32_t out = relu ? relu_out : add.outputs[0];
  const TensorInfo &M = plan.tensors[mid], &O = plan.tensors[out];
  // Element by element: y may be exactly x's bytes, never part of them.
  if (O.is_weight() || M.shape != X.shape || O.shape != X.shape || O.dtype != DType::kFloat32) return false;
  if (overlaps(O, X) && (O.offset != X.offset || O.bytes != X.bytes)) return false;
  *a = {x, scale, shift, out, relu, relu ? 2 : 1};
  return true;
}

std::unique_ptr<Kernel> make_channel_affine(const BuildCtx& bc, const ChannelAffine& a) {
  auto k = std::make_unique<ChannelAffineKernel>();
  const TensorInfo& X = bc.info(a.x);
  k->x = bc.ref(a.x);
  k->y = bc.ref(a.output);
  k->scale = bc.info(a.scale).data;
  k->shift = bc.info(a.shift).data;
  k->C = X.shape[1];
  k->P = X.elements() / k->C;
  k->relu = a.relu;
  return k;
}

}  // namespace memlane::cpu
