// Pad in constant, reflect and edge modes over any rank (<= 8); negative pads crop. The
// batch is an ordinary dimension here with zero pads, which the factory checks.
#include <algorithm>
#include <cstring>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

// Source index of output coordinate i - begin along a dimension of n: -1 = the constant.
inline int64_t source(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  if (mode == 0) return -1;
  if (mode == 2 || n == 1) return i < 0 ? 0 : n - 1;
  const int64_t period = 2 * (n - 1);  // reflect without repeating the border element
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

}  // namespace

void pad_nd(const float* x, float* y, int rank, const int64_t* in_dims, const int64_t* pads, int mode,
            float value) {
  int64_t out_dims[kPadMaxRank] = {}, stride[kPadMaxRank] = {};
  for (int k = 0; k < rank; ++k) out_dims[k] = in_dims[k] + pads[k] + pads[rank + k];
  stride[rank - 1] = 1;
  for (int k = rank - 2; k >= 0; --k) stride[k] = stride[k + 1] * in_dims[k + 1];
  const int64_t L = out_dims[rank - 1], n = in_dims[rank - 1], b = pads[rank - 1];
  int64_t rows = 1;
  for (int k = 0; k < rank - 1; ++k) rows *= out_dims[k];
  // The contiguous middle of a row: output columns [lo, hi) read x[lo - b, hi - b).
  const int64_t lo = std::clamp<int64_t>(b, 0, L), hi = std::clamp<int64_t>(b + n, 0, L);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, off = 0;
    bool inside = true;
    for (int k = rank - 2; k >= 0; --k) {
      const int64_t s = source(rem % out_dims[k] - pads[k], in_dims[k], mode);
      rem /= out_dims[k];
      if (s < 0) inside = false;
      off += s * stride[k];
    }
    float* yr = y + row * L;
    if (!inside) {
      std::fill(yr, yr + L, value);
      continue;
    }
    const float* xr = x + off;
    for (int64_t j = 0; j < lo; ++j) {
      const int64_t s = source(j - b, n, mode);
      yr[j] = s < 0 ? value : xr[s];
    }
    if (hi > lo) std::memcpy(yr + lo, xr + (lo - b), sizeof(float) * size_t(hi - lo));
    for (int64_t j = std::max(hi, lo); j < L; ++j) {
      const int64_t s = source(j - b, n, mode);
      yr[j] = s < 0 ? value : xr[s];
    }
  }
}

namespace {

class PadKernel final : public Kernel {
 public:
  TensorRef x, y;
  int rank = 0;
  int64_t in_dims[kPadMaxRank]{};  // in_dims[0] = batch at run time
  int64_t pads[2 * kPadMaxRank]{};
  int mode = 0;
  float value = 0.f;
  void run(const RunCtx& c) const override {
    int64_t dims[kPadMaxRank];
    std::copy(in_dims, in_dims + rank, dims);
    dims[0] = c.batch;
    pad_nd(x.at(c), y.at(c), rank, dims, pads, mode, value);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_pad(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const int r = int(X.shape.size());
  const auto& p = op.attrs.padsNd;
  if (X.is_weight()) return unsupported(op, "input must be an activation", st, msg);
  if (r < 1 || r > kPadMaxRank || int(Y.shape.size()) != r || int(p.size()) != 2 * r)
    return unsupported(op, "pads must list begins and ends for each of the " + std::to_string(r) +
                               " dimensions of " + shape_str(X.shape) + " (rank <= 8)", st, msg);
  if (p[0] != 0 || p[r] != 0) return unsupported(op, "padding the batch dimension is not supported", st, msg);
  const int mode = int(op.attrs.padMode);
  for (int i = 1; i < r; ++i) {
    if (X.shape[i] + p[i] + p[r + i] != Y.shape[i] || Y.shape[i] < 0)
      return unsupported(op, "output " + shape_str(Y.shape) + " is not " + shape_str(X.shape) + " padded", st, msg);
    if (X.shape[i] == 0 && mode != 0 && Y.shape[i] > 0)
      return unsupported(op, "reflect/edge padding of an empty dimension", st, msg);
  }
  auto k = std::make_unique<PadKernel>();
  k->rank = r;
  for (int i = 0; i < r; ++i) k->in_dims[i] = X.shape[i];
  std::copy(p.begin(), p.end(), k->pads);
  k->mode = mode;
  k->value = op.attrs.padValue;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
