// ONNX LSTM, one layer, forward / reverse / bidirectional, zero initial state: the input
// projection of every step is one sgemm up front, then each step is one [B, H] x [H, 4H]
// sgemm and the gate arithmetic. Plan v1 keeps the batch first, so its plans use layout 1
// (X [N, S, I], Y [N, S, D, H], Y_h / Y_c [N, D, H]); lstm() itself takes strides, so the
// seq-first layout 0 is only a different set of strides. This is the portable path: with
// AVX-512 the kernel runs lstm_packed.cc on weights repacked at build.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"
#include "cpu/lstm_packed.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx512.h"
#include "cpu/vmath.h"

namespace memlane::cpu {

LstmDims batch_first_dims(LstmDims d, int64_t B) {
  d.B = B;
  d.x_t = 1;
  d.x_b = d.S;
  d.y_t = d.D * d.H;
  d.y_d = d.H;
  d.y_b = d.S * d.D * d.H;
  d.s_d = d.H;
  d.s_b = d.D * d.H;
  return d;
}

int64_t lstm_workspace_floats(const LstmDims& d) {
  return d.S * d.B * 4 * d.H + d.B * 4 * d.H + 3 * d.B * d.H;
}

void lstm(const LstmDims& d, const float* x, const float* W, const float* R, const float* bias,
          float* y, float* yh, float* yc, float* workspace, ThreadPool* pool) {
  const int64_t S = d.S, B = d.B, I = d.I, H = d.H, G4 = 4 * H;
  float* proj = workspace;        // [S * B, 4H] in x's row order
  float* gates = proj + S * B * G4;  // [B, 4H]
  float* h = gates + B * G4;      // [B, H]
  float* c = h + B * H;           // [B, H]
  float* tc = c + B * H;          // [H] tanh(c)
  for (int dir = 0; dir < d.D; ++dir) {
    const bool back = dir == 1 || d.reverse;
    const float* Wd = W + dir * G4 * I;
    const float* Rd = R + dir * G4 * H;
    if (S * B > 0)
      sgemm_pool(pool, true, S * B, G4, I, 1.f, x, I, Wd, I, 0.f, proj, G4);
    if (bias) {
      const float* wb = bias + dir * 2 * G4;
      const float* rb = wb + G4;
      for (int64_t r = 0; r < S * B; ++r)
        for (int64_t j = 0; j < G4; ++j) proj[r * G4 + j] += wb[j] + rb[j];
    }
    std::fill(h, h + B * H, 0.f);
    std::fill(c, c + B * H, 0.f);
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = back ? S - 1 - step : step;
      if (step == 0) std::fill(gates, gates + B * G4, 0.f);  // h = 0: no recurrent term yet
      else
        sgemm_pool(pool, true, B, G4, H, 1.f, h, H, Rd, H, 0.f, gates, G4);  // OpenBLAS runs 1 thread
      for (int64_t b = 0; b < B; ++b) {
        float* g = gates + b * G4;
        const float* p = proj + (t * d.x_t + b * d.x_b) * G4;
        for (int64_t j = 0; j < G4; ++j) g[j] += p[j];
        vmath::sigmoid(g, g, 3 * H);        // i, o, f
        vmath::tanh(g + 3 * H, g + 3 * H, H);  // c~
        float* hb = h + b * H;
        float* cb = c + b * H;
        for (int64_t j = 0; j < H; ++j) cb[j] = g[2 * H + j] * cb[j] + g[j] * g[3 * H + j];
        vmath::tanh(cb, tc, H);
        for (int64_t j = 0; j < H; ++j) hb[j] = g[H + j] * tc[j];
        if (y) std::memcpy(y + t * d.y_t + dir * d.y_d + b * d.y_b, hb, sizeof(float) * size_t(H));
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (yh) std::memcpy(yh + dir * d.s_d + b * d.s_b, h + b * H, sizeof(float) * size_t(H));
      if (yc) std::memcpy(yc + dir * d.s_d + b * d.s_b, c + b * H, sizeof(float) * size_t(H));
    }
  }
}

namespace {

class LstmKernel final : public Kernel {
 public:
  LstmDims dims;  // B set per run
  TensorRef x, w, r, bias, y, yh, yc;
  bool has_bias = false, has_y = false, has_yh = false, has_yc = false;
  std::unique_ptr<LstmPacked> packed;  // the AVX-512 path's weights; null: portable lstm()

  LstmDims batch_first(int64_t B) const { return batch_first_dims(dims, B); }
  void run(const RunCtx& c) const override {
    const LstmDims d = batch_first(c.batch);
    float* yp = has_y ? y.at(c) : nullptr;
    float* yhp = has_yh ? yh.at(c) : nullptr;
    float* ycp = has_yc ? yc.at(c) : nullptr;
    if (packed) return lstm_packed(d, *packed, x.at(c), yp, yhp, ycp, c.workspace, c.pool);
    lstm(d, x.at(c), w.at(c), r.at(c), has_bias ? bias.at(c) : nullptr, yp, yhp, ycp, c.workspace, c.pool);
  }
  uint64_t workspace_floats(int64_t maxBatch) const override {
    const LstmDims d = batch_first(maxBatch);
    return uint64_t(packed ? lstm_packed_workspace_floats(d, *packed) : lstm_workspace_floats(d));
  }
  std::vector<const float*> repacked_weights() const override {
    if (!packed) return {};
    std::vector<const float*> v{w.weight, r.weight};
    if (has_bias) v.push_back(bias.weight);
    return v;
  }
  const char* path() const override { return packed ? "avx512" : "portable"; }
};

}  // namespace

std::unique_ptr<Kernel> make_lstm(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 3, 4, st, msg)) return nullptr;
  const OpAttrs& a = op.attrs;
  if (a.layout != 1)
    return unsupported(op, "layout 0 (sequence first, the batch on axis 1) needs the batch-at-any-axis plan; "
                           "plan v1 LSTMs are batch-first (layout 1)", st, msg);
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& W = bc.info(op.inputs[1]);
  const TensorInfo& R = bc.info(op.inputs[2]);
  const int D = a.direction == LstmDirection::kBidirectional ? 2 : 1;
  const int64_t H = a.hiddenSize;
  if (X.is_weight() || X.shape.size() != 3) return unsupported(op, "X must be an activation [N, S, I], found " + shape_str(X.shape), st, msg);
  const int64_t S = X.shape[1], I = X.shape[2];
  if (!W.is_weight() || W.shape != std::vector<int64_t>{D, 4 * H, I})
    return unsupported(op, "W must be a weight [" + std::to_string(D) + "," + std::to_string(4 * H) + "," + std::to_string(I) +
                               "], found " + shape_str(W.shape), st, msg);
  if (!R.is_weight() || R.shape != std::vector<int64_t>{D, 4 * H, H})
    return unsupported(op, "R must be a weight [" + std::to_string(D) + "," + std::to_string(4 * H) + "," + std::to_string(H) +
                               "], found " + shape_str(R.shape), st, msg);
  auto k = std::make_unique<LstmKernel>();
  if (op.inputs.size() > 3 && op.inputs[3] != kAbsentInput) {
    const TensorInfo& Bt = bc.info(op.inputs[3]);
    if (!Bt.is_weight() || Bt.shape != std::vector<int64_t>{D, 8 * H})
      return unsupported(op, "B must be a weight [" + std::to_string(D) + "," + std::to_string(8 * H) + "], found " + shape_str(Bt.shape), st, msg);
    k->bias = bc.ref(op.inputs[3]);
    k->has_bias = true;
  }
  // Y, Y_h, Y_c
  if (!bind_outputs(bc, op, {{{-1, S, D, H}, &k->y, &k->has_y}, {{-1, D, H}, &k->yh, &k->has_yh}, {{-1, D, H}, &k->yc, &k->has_yc}}, st, msg))
    return nullptr;
  k->dims.S = S;
  k->dims.I = I;
  k->dims.H = H;
  k->dims.D = D;
  k->dims.reverse = a.direction == LstmDirection::kReverse;
  k->x = bc.ref(op.inputs[0]);
  k->w = bc.ref(op.inputs[1]);
  k->r = bc.ref(op.inputs[2]);
  if (simd::have_avx512())
    k->packed = std::make_unique<LstmPacked>(lstm_pack(W.data, R.data, k->has_bias ? k->bias.weight : nullptr, D, H, I));
  return k;
}

}  // namespace memlane::cpu
