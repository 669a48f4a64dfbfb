// ONNX GRU, one layer, forward / reverse / bidirectional, zero initial state, gates z, r, h
// (sigmoid/tanh), either reset placement: the input projection of every step is one sgemm up
// front, then each step multiplies the state by R (z and r together, h after r where the
// reset comes before the product) and does the gate arithmetic. Batch-first like the LSTM
// (plan v1 layout 1: X [N, S, I], Y [N, S, D, H], Y_h [N, D, H]); the strides are LstmDims'.
#include <algorithm>
#include <cstring>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"
#include "cpu/sgemm_pool.h"
#include "cpu/vmath.h"

namespace memlane::cpu {

int64_t gru_workspace_floats(const LstmDims& d) {
  return d.S * d.B * 3 * d.H + d.B * 3 * d.H + 2 * d.B * d.H;
}

void gru(const LstmDims& d, bool linear_before_reset, const float* x, const float* W, const float* R,
         const float* bias, float* y, float* yh, float* workspace, ThreadPool* pool) {
  const int64_t S = d.S, B = d.B, I = d.I, H = d.H, G3 = 3 * H;
  float* proj = workspace;           // [S * B, 3H] in x's row order: x·W^T + Wb
  float* rec = proj + S * B * G3;    // [B, 3H]: h·R^T (+ Rb) of the step
  float* h = rec + B * G3;           // [B, H]
  float* rh = h + B * H;             // [B, H]: r ⊙ h, where the reset comes first
  for (int dir = 0; dir < d.D; ++dir) {
    const bool back = dir == 1 || d.reverse;
    const float* Wd = W + dir * G3 * I;
    const float* Rd = R + dir * G3 * H;
    const float* wb = bias ? bias + dir * 2 * G3 : nullptr;
    const float* rb = bias ? wb + G3 : nullptr;
    if (S * B > 0) sgemm_pool(pool, true, S * B, G3, I, 1.f, x, I, Wd, I, 0.f, proj, G3);
    if (wb)
      for (int64_t r = 0; r < S * B; ++r)
        for (int64_t j = 0; j < G3; ++j) proj[r * G3 + j] += wb[j];
    std::fill(h, h + B * H, 0.f);
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = back ? S - 1 - step : step;
      // z and r (and h's product by R where the reset comes after it): h·R^T, h = 0 at step 0.
      const int64_t n_first = linear_before_reset ? G3 : 2 * H;
      if (step == 0) std::fill(rec, rec + B * G3, 0.f);
      else sgemm_pool(pool, true, B, n_first, H, 1.f, h, H, Rd, H, 0.f, rec, G3);
      for (int64_t b = 0; b < B; ++b) {
        float* g = rec + b * G3;
        const float* p = proj + (t * d.x_t + b * d.x_b) * G3;
        for (int64_t j = 0; j < 2 * H; ++j) g[j] += p[j] + (rb ? rb[j] : 0.f);
        vmath::sigmoid(g, g, 2 * H);  // z, r
        if (linear_before_reset) {
          // h~ = tanh(x·Wh^T + Wbh + r ⊙ (h·Rh^T + Rbh))
          for (int64_t j = 0; j < H; ++j) g[2 * H + j] = p[2 * H + j] + g[H + j] * (g[2 * H + j] + (rb ? rb[2 * H + j] : 0.f));
        } else {
          for (int64_t j = 0; j < H; ++j) rh[b * H + j] = g[H + j] * h[b * H + j];
        }
      }
      if (!linear_before_reset) {
        // h~ = tanh(x·Wh^T + Wbh + (r ⊙ h)·Rh^T + Rbh)
        if (step == 0) for (int64_t b = 0; b < B; ++b) std::fill(rec + b * G3 + 2 * H, rec + b * G3 + G3, 0.f);
        else sgemm_pool(pool, true, B, H, H, 1.f, rh, H, Rd + 2 * H * H, H, 0.f, rec + 2 * H, G3);
        for (int64_t b = 0; b < B; ++b) {
          float* g = rec + b * G3;
          const float* p = proj + (t * d.x_t + b * d.x_b) * G3;
          for (int64_t j = 0; j < H; ++j) g[2 * H + j] += p[2 * H + j] + (rb ? rb[2 * H + j] : 0.f);
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        float* g = rec + b * G3;
        vmath::tanh(g + 2 * H, g + 2 * H, H);
        float* hb = h + b * H;
        for (int64_t j = 0; j < H; ++j) hb[j] = (1.f - g[j]) * g[2 * H + j] + g[j] * hb[j];
        if (y) std::memcpy(y + t * d.y_t + dir * d.y_d + b * d.y_b, hb, sizeof(float) * size_t(H));
      }
    }
    if (yh)
      for (int64_t b = 0; b < B; ++b) std::memcpy(yh + dir * d.s_d + b * d.s_b, h + b * H, sizeof(float) * size_t(H));
  }
}

namespace {

class GruKernel final : public Kernel {
 public:
  LstmDims dims;  // B set per run
  bool linear_before_reset = false;
  TensorRef x, w, r, bias, y, yh;
  bool has_bias = false, has_y = false, has_yh = false;

  LstmDims batch_first(int64_t B) const { return batch_first_dims(dims, B); }
  void run(const RunCtx& c) const override {
    gru(batch_first(c.batch), linear_before_reset, x.at(c), w.at(c), r.at(c), has_bias ? bias.at(c) : nullptr,
        has_y ? y.at(c) : nullptr, has_yh ? yh.at(c) : nullptr, c.workspace, c.pool);
  }
  uint64_t workspace_floats(int64_t maxBatch) const override { return uint64_t(gru_workspace_floats(batch_first(maxBatch))); }
};

}  // namespace

std::unique_ptr<Kernel> make_gru(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 3, 4, st, msg)) return nullptr;
  const OpAttrs& a = op.attrs;
  if (a.layout != 1) return unsupported(op, "plan v1 GRUs are batch-first (layout 1)", st, msg);
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& W = bc.info(op.inputs[1]);
  const TensorInfo& R = bc.info(op.inputs[2]);
  const int D = a.direction == LstmDirection::kBidirectional ? 2 : 1;
  const int64_t H = a.hiddenSize;
  if (X.is_weight() || X.shape.size() != 3) return unsupported(op, "X must be an activation [N, S, I], found " + shape_str(X.shape), st, msg);
  const int64_t S = X.shape[1], I = X.shape[2];
  const auto dims = [](std::initializer_list<int64_t> v) { return std::vector<int64_t>(v); };
  if (!W.is_weight() || W.shape != dims({D, 3 * H, I}))
    return unsupported(op, "W must be a weight " + shape_str(dims({D, 3 * H, I})) + ", found " + shape_str(W.shape), st, msg);
  if (!R.is_weight() || R.shape != dims({D, 3 * H, H}))
    return unsupported(op, "R must be a weight " + shape_str(dims({D, 3 * H, H})) + ", found " + shape_str(R.shape), st, msg);
  auto k = std::make_unique<GruKernel>();
  if (op.inputs.size() > 3 && op.inputs[3] != kAbsentInput) {
    const TensorInfo& Bt = bc.info(op.inputs[3]);
    if (!Bt.is_weight() || Bt.shape != dims({D, 6 * H}))
      return unsupported(op, "B must be a weight " + shape_str(dims({D, 6 * H})) + ", found " + shape_str(Bt.shape), st, msg);
    k->bias = bc.ref(op.inputs[3]);
    k->has_bias = true;
  }
  // Y, Y_h
  if (!bind_outputs(bc, op, {{{-1, S, D, H}, &k->y, &k->has_y}, {{-1, D, H}, &k->yh, &k->has_yh}}, st, msg)) return nullptr;
  k->dims.S = S;
  k->dims.I = I;
  k->dims.H = H;
  k->dims.D = D;
  k->dims.reverse = a.direction == LstmDirection::kReverse;
  k->linear_before_reset = a.linearBeforeReset;
  k->x = bc.ref(op.inputs[0]);
  k->w = bc.ref(op.inputs[1]);
  k->r = bc.ref(op.inputs[2]);
  return k;
}

}  // namespace memlane::cpu
