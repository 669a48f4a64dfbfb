// Slice (constant starts/steps per axis, resolved by the compiler; negative steps too) and
// the batch-sized generators Range(0, k x batch, 1) and ConstantOfShape, on any dtype.
#include <algorithm>
#include <cstring>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

constexpr int kMaxRank = 8;

class SliceKernel final : public Kernel {
 public:
  TensorRef x, y;
  int rank = 0;
  int64_t ishape[kMaxRank] = {}, oshape[kMaxRank] = {};  // plan shapes (-k = k x batch)
  int64_t start[kMaxRank] = {}, step[kMaxRank] = {};     // 0 / 1 on axes not sliced
  size_t esize = 4;
  void run(const RunCtx& c) const override {
    auto res = [&](int64_t v) { return v < 0 ? -v * c.batch : v; };
    int64_t istride[kMaxRank] = {}, od[kMaxRank] = {};  // rank >= 1: make_slice refuses rank 0
    int64_t acc = 1;
    for (int i = rank - 1; i >= 0; --i) {
      istride[i] = acc;
      acc *= res(ishape[i]);
      od[i] = res(oshape[i]);
    }
    const uint8_t* X = x.as<uint8_t>(c);
    uint8_t* Y = y.as<uint8_t>(c);
    // The innermost axes copied whole and the last sliced axis k before them make one
    // contiguous run where k's step is 1: a channel Slice of NCHW is one block a sample, not a
    // memcpy (and rank - 1 divisions) a row of W floats. ShuffleNet's channel splits at batch
    // 8 were 2688 7-float copies each, 46-53 us against ONNX Runtime's 10-32.
    int k = rank - 1;
    int64_t inner = 1;
    while (k >= 0 && start[k] == 0 && step[k] == 1 && od[k] == res(ishape[k])) inner *= od[k--];
    if (k < 0) {  // nothing sliced
      std::memcpy(Y, X, size_t(inner) * esize);
      return;
    }
    // Rows: every index of axes [0, outer); each row copies `len` elements (step 1 at k: axis
    // k's run and the whole axes after it; a strided k with whole axes after it: `inner`
    // elements, k among the row axes), or, a strided last axis, od[k] single elements.
    const bool run_k = step[k] == 1, single = !run_k && inner == 1;
    const int outer = run_k || single ? k : k + 1;
    const int64_t len = run_k ? od[k] * inner : single ? od[k] : inner;
    const int64_t base = run_k || single ? start[k] * istride[k] : 0, elem = step[k] * istride[k];
    int64_t rows = 1;
    for (int i = 0; i < outer; ++i) rows *= od[i];
    c.pool->parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t rem = r, off = base;
        for (int i = outer - 1; i >= 0; --i) {
          off += (start[i] + (rem % od[i]) * step[i]) * istride[i];
          rem /= od[i];
        }
        uint8_t* dst = Y + size_t(r * len) * esize;
        if (!single) std::memcpy(dst, X + size_t(off) * esize, size_t(len) * esize);
        else
          for (int64_t j = 0; j < len; ++j) std::memcpy(dst + size_t(j) * esize, X + size_t(off + j * elem) * esize, esize);
      }
    });
  }
};

class GeneratorKernel final : public Kernel {
 public:
  TensorRef y;
  DType dtype = DType::kFloat32;
  int64_t per_sample = 0;
  bool range = false;
  double value = 0, start = 0, delta = 1;
  template <typename T>
  void fill(T* p, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) p[i] = range ? T(start + double(i) * delta) : T(value);
  }
  void run(const RunCtx& c) const override {
    const int64_t n = per_sample * c.batch;
    switch (dtype) {
      case DType::kFloat32: fill(y.as<float>(c), n); break;
      case DType::kInt64: fill(y.as<int64_t>(c), n); break;
      case DType::kInt32: fill(y.as<int32_t>(c), n); break;
      case DType::kBool: fill(y.as<uint8_t>(c), n); break;
    }
  }
};

}  // namespace

std::unique_ptr<Kernel> make_slice(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo &X = bc.info(op.inputs[0]), &Y = bc.info(op.outputs[0]);
  const int r = int(X.shape.size());
  if (r < 1 || r > kMaxRank || Y.shape.size() != X.shape.size() || X.dtype != Y.dtype)
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " must share rank (<= 8) and dtype", st, msg);
  auto k = std::make_unique<SliceKernel>();
  k->rank = r;
  for (int i = 0; i < r; ++i) {
    k->ishape[i] = X.shape[size_t(i)];
    k->oshape[i] = Y.shape[size_t(i)];
    k->step[i] = 1;
  }
  const auto& a = op.attrs;
  for (size_t j = 0; j < a.axes.size(); ++j) {
    const int64_t ax = a.axes[j], d = ax >= 0 && ax < r ? X.shape[size_t(ax)] : -1, n = ax >= 0 && ax < r ? Y.shape[size_t(ax)] : -1;
    const int64_t s = a.starts[j], p = a.steps[j];
    // Every element read must lie inside the axis: start and start + (n - 1) * step.
    if (d < 1 || n < 1 || p == 0 || s < 0 || s >= d || s + (n - 1) * p < 0 || s + (n - 1) * p >= d)
      return unsupported(op, "axis " + std::to_string(ax) + " start " + std::to_string(s) + " step " + std::to_string(p) +
                                 " does not fit " + shape_str(X.shape) + " -> " + shape_str(Y.shape), st, msg);
    k->start[ax] = s;
    k->step[ax] = p;
  }
  for (int i = 0; i < r; ++i)
    if (k->step[i] == 1 && k->start[i] == 0 && X.shape[size_t(i)] != Y.shape[size_t(i)] &&
        std::find(a.axes.begin(), a.axes.end(), int64_t(i)) == a.axes.end())
      return unsupported(op, "axis " + std::to_string(i) + " changes size but is not sliced", st, msg);
  k->esize = dtype_size(X.dtype);
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

std::unique_ptr<Kernel> make_generator(const BuildCtx& bc, const Op& op, Status* /*st*/, std::string* /*msg*/) {
  const TensorInfo& Y = bc.info(op.outputs[0]);
  auto k = std::make_unique<GeneratorKernel>();
  k->y = bc.ref(op.outputs[0]);
  k->dtype = Y.dtype;
  k->per_sample = Y.elements();
  k->range = op.type == OpType::kRange;
  k->value = op.attrs.value;
  k->start = op.attrs.start;
  k->delta = op.attrs.delta;
  return k;
}

}  // namespace memlane::cpu
