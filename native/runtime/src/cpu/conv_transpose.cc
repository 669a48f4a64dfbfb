// ConvTranspose (2-D; the compiler writes a 1-D one as 2-D): per sample and group, one sgemm
// gives every input pixel's contribution to each output channel and kernel tap (the columns),
// then col2im adds each tap's plane into the output at stride s, the bias first. That is the
// gradient of Conv's im2col path, and how ONNX Runtime's CPU kernel computes it too.
//
// The plan's weight is [group, M/group, kh, kw, C/group] (the compiler permuted ONNX's
// [C, M/group, kh, kw]): each (m, i, j) row holds its C/group input weights contiguously, so
// the product is a plain row-major sgemm with no transposed operand.
#include <algorithm>
#include <memory>

#include "cpu/kernel.h"
#include "cpu/sgemm_pool.h"

namespace memlane::cpu {
namespace {

class ConvTransposeKernel final : public Kernel {
 public:
  int64_t C = 0, H = 0, W = 0, M = 0, OH = 0, OW = 0, kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, group = 1;
  const float* w = nullptr;
  const float* b = nullptr;
  TensorRef x, y;

  int64_t Cg() const { return C / group; }
  int64_t Mg() const { return M / group; }
  int64_t taps() const { return Mg() * kh * kw; }

  uint64_t workspace_floats(int64_t) const override { return uint64_t(taps() * H * W); }

  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    float* col = c.workspace;
    const int64_t HW = H * W, OHW = OH * OW;
    for (int64_t n = 0; n < c.batch; ++n) {
      for (int64_t g = 0; g < group; ++g) {
        // col[(m, i, j)][ih * W + iw] = sum_c w[g][m][i][j][c] * x[n][g * Cg + c][ih][iw]
        sgemm_pool(c.pool, false, taps(), HW, Cg(), 1.f, w + g * taps() * Cg(), Cg(),
                   X + (n * C + g * Cg()) * HW, HW, 0.f, col, HW);
        float* Yg = Y + (n * M + g * Mg()) * OHW;
        c.pool->parallel_for(Mg(), 1, [&](int64_t m0, int64_t m1) {
          for (int64_t m = m0; m < m1; ++m) add_taps(col, m, Yg + m * OHW, b ? b[g * Mg() + m] : 0.f);
        });
      }
    }
  }

 private:
  // y = bias, then every tap (i, j) of output channel m added at oh = ih * sh - pt + i * dh,
  // ow = iw * sw - pl + j * dw, where those fall inside the output.
  void add_taps(const float* col, int64_t m, float* yp, float bias) const {
    std::fill(yp, yp + OH * OW, bias);
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        const float* plane = col + ((m * kh + i) * kw + j) * H * W;
        const int64_t woff = j * dw - pl;
        // iw range whose ow = iw * sw + woff lies in [0, OW)
        const int64_t lo = woff >= 0 ? 0 : (-woff + sw - 1) / sw;
        const int64_t hi = std::min(W, OW - woff > 0 ? (OW - woff + sw - 1) / sw : 0);
        if (lo >= hi) continue;
        for (int64_t ih = 0; ih < H; ++ih) {
          const int64_t oh = ih * sh - pt + i * dh;
          if (oh < 0 || oh >= OH) continue;
          const float* __restrict src = plane + ih * W;
          float* __restrict dst = yp + oh * OW;
          if (sw == 1)
            for (int64_t iw = lo; iw < hi; ++iw) dst[iw + woff] += src[iw];
          else
            for (int64_t iw = lo; iw < hi; ++iw) dst[iw * sw + woff] += src[iw];
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<Kernel> make_conv_transpose(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 3, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Wt = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.shape.size() != 4 || Y.shape.size() != 4) return unsupported(op, "input and output must be [N, C, H, W]", st, msg);
  if (!Wt.is_weight() || Wt.shape.size() != 5) return unsupported(op, "W must be a weight [group, M/group, kh, kw, C/group]", st, msg);
  const OpAttrs& a = op.attrs;
  auto k = std::make_unique<ConvTransposeKernel>();
  k->C = X.shape[1]; k->H = X.shape[2]; k->W = X.shape[3];
  k->M = Y.shape[1]; k->OH = Y.shape[2]; k->OW = Y.shape[3];
  k->kh = a.kernel[0]; k->kw = a.kernel[1];
  k->sh = a.strides[0]; k->sw = a.strides[1];
  k->dh = a.dilations[0]; k->dw = a.dilations[1];
  k->pt = a.pads[0]; k->pl = a.pads[1];
  k->group = a.group;
  const std::vector<int64_t> want = {k->group, k->M / k->group, k->kh, k->kw, k->C / k->group};
  if (k->C % k->group != 0 || k->M % k->group != 0 || Wt.shape != want)
    return unsupported(op, "W " + shape_str(Wt.shape) + " does not fit " + std::to_string(k->C) + " input and " +
                               std::to_string(k->M) + " output channels in " + std::to_string(k->group) + " groups (want " +
                               shape_str(want) + ")", st, msg);
  if (k->sh < 1 || k->sw < 1 || k->dh < 1 || k->dw < 1) return unsupported(op, "strides and dilations must be >= 1", st, msg);
  // The output the pads and strides give: the compiler resolved output_padding and output_shape
  // into the end pads (which may be negative), so the two must agree exactly.
  const int64_t oh = (k->H - 1) * k->sh + (k->kh - 1) * k->dh + 1 - a.pads[0] - a.pads[2];
  const int64_t ow = (k->W - 1) * k->sw + (k->kw - 1) * k->dw + 1 - a.pads[1] - a.pads[3];
  if (oh != k->OH || ow != k->OW)
    return unsupported(op, "output " + shape_str(Y.shape) + " does not match the window's [" + std::to_string(oh) + ", " +
                               std::to_string(ow) + "]", st, msg);
  if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput) {
    const TensorInfo& B = bc.info(op.inputs[2]);
    if (!B.is_weight() || B.elements() != k->M) return unsupported(op, "bias must be a weight of " + std::to_string(k->M), st, msg);
    k->b = B.data;
  }
  k->w = Wt.data;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
