// Gather along one axis: an embedding lookup (weight table, run-time int64/int32 indices) or a
// pick from an activation with constant indices. Shapes are resolved for the batch at run
// time (the batch may sit in the data's outer dims, its inner dims or the indices). An index
// out of range is a run-time error of the request (KernelError), never a read outside.
#include <cstdlib>
#include <cstring>

#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

template <typename I>
class GatherKernel final : public Kernel {
 public:
  TensorRef data, indices, y;
  std::vector<int64_t> dshape, ishape;  // plan shapes (-k = k x batch)
  int axis = 0;
  size_t esize = 4;
  std::string name;
  void run(const RunCtx& c) const override {
    auto res = [&](int64_t v) { return v < 0 ? -v * c.batch : v; };
    int64_t outer = 1, inner = 1, nidx = 1;
    for (int i = 0; i < axis; ++i) outer *= res(dshape[size_t(i)]);
    for (size_t i = size_t(axis) + 1; i < dshape.size(); ++i) inner *= res(dshape[i]);
    for (int64_t d : ishape) nidx *= res(d);
    const int64_t len = res(dshape[size_t(axis)]);
    const uint8_t* D = data.as<uint8_t>(c);
    const I* idx = indices.as<I>(c);
    uint8_t* Y = y.as<uint8_t>(c);
    const size_t row = size_t(inner) * esize;
    // Rows of at least 32k elements a thread (an embedding lookup of 128 tokens is ~1 us).
    c.pool->parallel_for(outer * nidx, std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r / nidx, j = r % nidx;
        int64_t k = int64_t(idx[j]);
        if (k < 0) k += len;  // negative indices count from the end (ONNX)
        uint8_t* dst = Y + size_t(r) * row;
        if (k < 0 || k >= len) {
          if (c.error)
            c.error->report("op Gather '" + name + "': index " + std::to_string(int64_t(idx[j])) + " is out of range [" +
                            std::to_string(-len) + ", " + std::to_string(len) + ") at flat position " + std::to_string(j));
          std::memset(dst, 0, row);
          continue;
        }
        std::memcpy(dst, D + (size_t(o * len + k) * row), row);
      }
    });
  }
};

template <typename I>
std::unique_ptr<Kernel> build(const BuildCtx& bc, const Op& op) {
  auto k = std::make_unique<GatherKernel<I>>();
  const TensorInfo& D = bc.info(op.inputs[0]);
  k->data = bc.ref(op.inputs[0]);
  k->indices = bc.ref(op.inputs[1]);
  k->y = bc.ref(op.outputs[0]);
  k->dshape = D.shape;
  k->ishape = bc.info(op.inputs[1]).shape;
  k->axis = op.attrs.axis;
  k->esize = dtype_size(D.dtype);
  k->name = op.name;
  return k;
}

}  // namespace

std::unique_ptr<Kernel> make_gather(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 2, st, msg)) return nullptr;
  const TensorInfo &D = bc.info(op.inputs[0]), &I = bc.info(op.inputs[1]), &Y = bc.info(op.outputs[0]);
  const int axis = op.attrs.axis;
  if (axis < 0 || axis >= int(D.shape.size())) return unsupported(op, "axis " + std::to_string(axis) + " out of range for " + shape_str(D.shape), st, msg);
  // The data's batch sits on the gathered axis and the run-time indices hold the batch: the
  // data is a flat table the indices address (transformers' masks index a flattened
  // [batch * seq] mask with batch_idx * seq + kv_idx); the output's batch is the indices'.
  const bool batchTable = D.shape[size_t(axis)] < 0 && !I.is_weight();
  if (D.shape[size_t(axis)] < 0 && !batchTable) return unsupported(op, "gathering along the batch axis with constant indices", st, msg);
  if (!D.is_weight() && !I.is_weight() && !batchTable) return unsupported(op, "data and indices both hold the batch", st, msg);
  if (I.dtype != DType::kInt64 && I.dtype != DType::kInt32) return unsupported(op, std::string("indices are ") + dtype_name(I.dtype), st, msg);
  if (Y.dtype != D.dtype || Y.elements() != D.elements() / std::abs(D.shape[size_t(axis)]) * I.elements())
    return unsupported(op, "output " + shape_str(Y.shape) + " does not fit data " + shape_str(D.shape) + " and indices " + shape_str(I.shape), st, msg);
  return I.dtype == DType::kInt64 ? build<int64_t>(bc, op) : build<int32_t>(bc, op);
}

}  // namespace memlane::cpu
