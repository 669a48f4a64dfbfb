// GatherND with batch_dims 0: each index tuple (the last axis of the indices, r entries)
// picks a slice of the data's trailing dims after the first r. transformers' dynamo exports
// build attention masks this way (mask[arange(batch), arange(seq)] over [batch, 1, 1, seq]
// tuples), so the tuples index the data's batch axis too: shapes are resolved for the request's
// batch at run time. An index out of range is a request error (KernelError), never a read outside.
#include <cstring>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

template <typename I>
class GatherNDKernel final : public Kernel {
 public:
  TensorRef data, indices, y;
  TensorInfo dinfo, iinfo;  // plan shapes (-k = k x batch)
  size_t esize = 4;
  std::string name;
  void run(const RunCtx& c) const override {
    const std::vector<int64_t> ds = dinfo.resolved(c.batch), is = iinfo.resolved(c.batch);
    const int r = int(is.back());
    int64_t tuples = 1, slice = 1;
    for (size_t i = 0; i + 1 < is.size(); ++i) tuples *= is[i];
    for (size_t i = size_t(r); i < ds.size(); ++i) slice *= ds[i];
    std::vector<int64_t> stride(size_t(r), slice);  // elements between steps of data axis j < r
    for (int j = r - 2; j >= 0; --j) stride[size_t(j)] = stride[size_t(j) + 1] * ds[size_t(j) + 1];
    const uint8_t* D = data.as<uint8_t>(c);
    const I* idx = indices.as<I>(c);
    uint8_t* Y = y.as<uint8_t>(c);
    const size_t row = size_t(slice) * esize;
    c.pool->parallel_for(tuples, std::max<int64_t>(1, 4096 / std::max<int64_t>(slice, 1)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        int64_t off = 0;
        bool ok = true;
        for (int j = 0; j < r && ok; ++j) {
          int64_t k = int64_t(idx[t * r + j]);
          if (k < 0) k += ds[size_t(j)];  // negative indices count from the end (ONNX)
          if (k < 0 || k >= ds[size_t(j)]) {
            ok = false;
            if (c.error)
              c.error->report("op GatherND '" + name + "': index " + std::to_string(int64_t(idx[t * r + j])) +
                              " of tuple " + std::to_string(t) + " is out of range for data axis " + std::to_string(j) +
                              " of size " + std::to_string(ds[size_t(j)]));
          }
          off += k * stride[size_t(j)];
        }
        uint8_t* dst = Y + size_t(t) * row;
        if (ok) std::memcpy(dst, D + size_t(off) * esize, row);
        else std::memset(dst, 0, row);
      }
    });
  }
};

template <typename I>
std::unique_ptr<Kernel> build(const BuildCtx& bc, const Op& op) {
  auto k = std::make_unique<GatherNDKernel<I>>();
  const TensorInfo& D = bc.info(op.inputs[0]);
  k->data = bc.ref(op.inputs[0]);
  k->indices = bc.ref(op.inputs[1]);
  k->y = bc.ref(op.outputs[0]);
  k->dinfo.shape = D.shape;
  k->iinfo.shape = bc.info(op.inputs[1]).shape;
  k->esize = dtype_size(D.dtype);
  k->name = op.name;
  return k;
}

}  // namespace

std::unique_ptr<Kernel> make_gather_nd(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 2, st, msg)) return nullptr;
  const TensorInfo &D = bc.info(op.inputs[0]), &I = bc.info(op.inputs[1]), &Y = bc.info(op.outputs[0]);
  if (I.dtype != DType::kInt64 && I.dtype != DType::kInt32)
    return unsupported(op, std::string("indices are ") + dtype_name(I.dtype), st, msg);
  const int64_t r = I.shape.empty() ? -1 : I.shape.back();
  if (r < 1 || r > int64_t(D.shape.size()))
    return unsupported(op, "the indices' last dim must be 1..rank of data " + shape_str(D.shape) + "; indices " +
                               shape_str(I.shape), st, msg);
  // The output is indices[:-1] + data[r:]; exactly one of them may carry the batch.
  std::vector<int64_t> want(I.shape.begin(), I.shape.end() - 1);
  want.insert(want.end(), D.shape.begin() + r, D.shape.end());
  if (Y.dtype != D.dtype || Y.shape != want)
    return unsupported(op, "output " + shape_str(Y.shape) + " is not indices[:-1] + data[r:] of data " +
                               shape_str(D.shape) + " and indices " + shape_str(I.shape), st, msg);
  return I.dtype == DType::kInt64 ? build<int64_t>(bc, op) : build<int32_t>(bc, op);
}

}  // namespace memlane::cpu
