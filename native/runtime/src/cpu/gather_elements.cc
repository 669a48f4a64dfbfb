// GatherElements: y[p] = data[p with its `axis` coordinate replaced by indices[p]], y of the
// indices' shape, each of their dims but `axis` at most the data's (the compiler checks ONNX
// Runtime's rule). transformers reads RoBERTa's token types from a buffer expanded to the batch
// at the positions CumSum numbered. Shapes are resolved for the request's batch at run time;
// negative indices count from the end; an index out of range is a request error (KernelError),
// never a read outside. Along the data's batch axis the indices are sample numbers of the whole
// batch: the backend then runs the batch whole (cpu_backend.cc, `chunkable`).
#include <algorithm>

#include "cpu/broadcast.h"
#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

// The data ops' rank limit (the CUDA backend's kMaxDataRank is the same one).
constexpr size_t kMaxRank = size_t(kMaxBroadcastRank);

template <typename W, typename I>  // W: an unsigned word of the element's size
class GatherElementsKernel final : public Kernel {
 public:
  TensorRef data, indices, y;
  TensorInfo dinfo, iinfo;  // plan shapes (-k = k x batch)
  int axis = 0;
  std::string name;
  void run(const RunCtx& c) const override {
    const std::vector<int64_t> ds = dinfo.resolved(c.batch), is = iinfo.resolved(c.batch);
    const size_t rank = ds.size(), last = rank - 1;
    int64_t stride[kMaxRank];  // the data's element strides
    int64_t acc = 1;
    for (size_t i = rank; i-- > 0;) {
      stride[i] = acc;
      acc *= ds[i];
    }
    const int64_t len = is[last], alen = ds[size_t(axis)], astride = stride[size_t(axis)];
    int64_t rows = 1;
    for (size_t i = 0; i < last; ++i) rows *= is[i];
    const W* D = data.as<W>(c);
    const I* idx = indices.as<I>(c);
    W* Y = y.as<W>(c);
    const bool alongRow = size_t(axis) == last;
    c.pool->parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        // The row's offset in the data, its coordinate on `axis` left to the index.
        int64_t rem = r, base = 0;
        for (size_t i = last; i-- > 0;) {
          if (i != size_t(axis)) base += (rem % is[i]) * stride[i];
          rem /= is[i];
        }
        const I* ir = idx + r * len;
        W* yr = Y + r * len;
        for (int64_t j = 0; j < len; ++j) {
          int64_t k = int64_t(ir[j]);
          if (k < 0) k += alen;  // negative indices count from the end (ONNX)
          if (k < 0 || k >= alen) {
            if (c.error)
              c.error->report("op GatherElements '" + name + "': index " + std::to_string(int64_t(ir[j])) + " is out of range [" +
                              std::to_string(-alen) + ", " + std::to_string(alen) + ") of data axis " + std::to_string(axis) +
                              " at flat position " + std::to_string(r * len + j));
            yr[j] = W(0);
            continue;
          }
          yr[j] = D[base + k * astride + (alongRow ? 0 : j)];
        }
      }
    });
  }
};

template <typename W, typename I>
std::unique_ptr<Kernel> build(const BuildCtx& bc, const Op& op) {
  auto k = std::make_unique<GatherElementsKernel<W, I>>();
  k->data = bc.ref(op.inputs[0]);
  k->indices = bc.ref(op.inputs[1]);
  k->y = bc.ref(op.outputs[0]);
  k->dinfo.shape = bc.info(op.inputs[0]).shape;
  k->iinfo.shape = bc.info(op.inputs[1]).shape;
  k->axis = op.attrs.axis;
  k->name = op.name;
  return k;
}

template <typename I>
std::unique_ptr<Kernel> build_words(const BuildCtx& bc, const Op& op) {
  switch (dtype_size(bc.info(op.inputs[0]).dtype)) {
    case 8: return build<uint64_t, I>(bc, op);
    case 4: return build<uint32_t, I>(bc, op);
    default: return build<uint8_t, I>(bc, op);
  }
}

}  // namespace

std::unique_ptr<Kernel> make_gather_elements(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 2, st, msg)) return nullptr;
  const TensorInfo &D = bc.info(op.inputs[0]), &I = bc.info(op.inputs[1]), &Y = bc.info(op.outputs[0]);
  if (I.dtype != DType::kInt64 && I.dtype != DType::kInt32)
    return unsupported(op, std::string("indices are ") + dtype_name(I.dtype), st, msg);
  const size_t rank = D.shape.size();
  const int axis = op.attrs.axis;
  if (rank < 1 || rank > kMaxRank || I.shape.size() != rank || axis < 0 || axis >= int(rank))
    return unsupported(op, "data " + shape_str(D.shape) + " and indices " + shape_str(I.shape) + " must share a rank of 1..8 with axis " +
                               std::to_string(axis) + " in it", st, msg);
  // Off the axis an indices dim is the data's (the batch included) or a fixed one no larger.
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = D.shape[i], k = I.shape[i];
    if (int(i) != axis && k != d && (k < 0 || d < 0 || k > d))
      return unsupported(op, "indices " + shape_str(I.shape) + " exceed data " + shape_str(D.shape) + " on axis " + std::to_string(i) +
                                 " (only axis " + std::to_string(axis) + " may differ)", st, msg);
  }
  if (Y.dtype != D.dtype || Y.shape != I.shape)
    return unsupported(op, "output " + shape_str(Y.shape) + " " + dtype_name(Y.dtype) + " is not the indices' shape " +
                               shape_str(I.shape) + " in the data's dtype " + dtype_name(D.dtype), st, msg);
  return I.dtype == DType::kInt64 ? build_words<int64_t>(bc, op) : build_words<int32_t>(bc, op);
}

}  // namespace memlane::cpu
