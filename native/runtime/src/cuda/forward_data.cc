// The launchers of the ops of any dtype with the batch at any axis (plan v2): descriptors
// computed from the shapes resolved for the request's batch, trusting the checks of
// forward_data_checks.cc (made at prepare, where a dry run only checks).
#include "cuda_check.h"
#include "forward_util.h"

namespace memlane::cuda {
namespace {

// The same broadcast on the dims resolved for a batch: element strides, 0 where broadcast.
DataBroadcast broadcast_of(const std::vector<int64_t>& y, const std::vector<std::vector<int64_t>>& xs) {
  DataBroadcast d;
  d.rank = int(y.size());
  for (int i = 0; i < d.rank; ++i) d.out_dims[i] = y[size_t(i)];
  for (size_t j = 0; j < xs.size(); ++j) {
    const int off = d.rank - int(xs[j].size());
    int64_t st = 1;
    for (int i = d.rank - 1; i >= off; --i) {
      const int64_t dim = xs[j][size_t(i - off)];
      d.strides[j][i] = dim == 1 ? 0 : st;
      st *= dim;
    }
  }
  return d;
}

DataBinaryKind binary_kind(const Op& op) {
  switch (op.type) {
    case OpType::kAdd: return DataBinaryKind::kAdd;
    case OpType::kSub: return DataBinaryKind::kSub;
    case OpType::kMul: return DataBinaryKind::kMul;
    case OpType::kDiv: return DataBinaryKind::kDiv;
    case OpType::kMod: return op.attrs.fmod ? DataBinaryKind::kFmod : DataBinaryKind::kMod;
    case OpType::kMax: return DataBinaryKind::kMax;
    case OpType::kMin: return DataBinaryKind::kMin;
    case OpType::kPRelu: return DataBinaryKind::kPRelu;
    case OpType::kEqual: return DataBinaryKind::kEqual;
    case OpType::kLess: return DataBinaryKind::kLess;
    case OpType::kGreater: return DataBinaryKind::kGreater;
    case OpType::kLessOrEqual: return DataBinaryKind::kLessOrEqual;
    case OpType::kGreaterOrEqual: return DataBinaryKind::kGreaterOrEqual;
    case OpType::kAnd: return DataBinaryKind::kAnd;
    default: return DataBinaryKind::kOr;
  }
}

}  // namespace

Status run_data_op(const ForwardEnv& env, const Op& op, int64_t batch, cudaStream_t s, bool dry, std::string* message) {
  if (dry) return check_data_op(*env.plan, op, message);
  const Plan& plan = *env.plan;
  const auto ptr = [&](int32_t id) { return tensor_ptr(env, id, batch); };
  const auto dims = [&](int32_t id) { return dims_of(plan.tensors[id], batch); };
  const auto elem = [&](int32_t id) { return elem_of(plan.tensors[id].dtype, env.prec); };
  const int32_t x = op.inputs.empty() ? kAbsentInput : op.inputs[0], y = op.outputs[0];
  const int64_t n_out = batch * plan.tensors[y].elements();
  // The op's number in the plan, reported when its run-time indices are out of range.
  const int tag = int(&op - plan.ops.data()) + 1;
  if (is_binary_op(op.type)) {
    CUDA_CHECK(data_binary(binary_kind(op), elem(x), ptr(x), ptr(op.inputs[1]), ptr(y),
                           broadcast_of(dims(y), {dims(x), dims(op.inputs[1])}), s));
    return Status::kOk;
  }
  const int es = elem_bytes(elem(y));
  switch (op.type) {
    case OpType::kWhere:
      CUDA_CHECK(where(es, ptr(x), ptr(op.inputs[1]), ptr(op.inputs[2]), ptr(y),
                       broadcast_of(dims(y), {dims(x), dims(op.inputs[1]), dims(op.inputs[2])}), s));
      return Status::kOk;
    case OpType::kExpand:
      CUDA_CHECK(expand(es, ptr(x), ptr(y), broadcast_of(dims(y), {dims(x)}), s));
      return Status::kOk;
    case OpType::kCast:
      CUDA_CHECK(cast(elem(x), elem(y), ptr(x), ptr(y), n_out, s));
      return Status::kOk;
    case OpType::kNot:
      CUDA_CHECK(logical_not(ptr(x), ptr(y), n_out, s));
      return Status::kOk;
    case OpType::kRange: case OpType::kConstantOfShape:
      CUDA_CHECK(fill(elem(y), op.type == OpType::kRange, op.attrs.value, op.attrs.start, op.attrs.delta, ptr(y), n_out, s));
      return Status::kOk;
    case OpType::kReshape:
      if (ptr(x) != ptr(y)) CUDA_CHECK(cudaMemcpyAsync(ptr(y), ptr(x), size_t(n_out) * es, cudaMemcpyDeviceToDevice, s));
      return Status::kOk;
    case OpType::kTranspose: {
      const auto xd = dims(x);
      CUDA_CHECK(transpose(env.prec, ptr(x), ptr(y), int(xd.size()), xd.data(), op.attrs.perm.data(), s));
      return Status::kOk;
    }
    case OpType::kSlice: {
      const auto xd = dims(x), yd = dims(y);
      SliceDesc d;
      d.rank = int(xd.size());
      int64_t st = 1;
      for (int i = d.rank - 1; i >= 0; --i) {
        d.out_dims[i] = yd[size_t(i)];
        d.in_stride[i] = st;
        d.step[i] = 1;
        st *= xd[size_t(i)];
      }
      for (size_t j = 0; j < op.attrs.axes.size(); ++j) {
        d.start[op.attrs.axes[j]] = op.attrs.starts[j];
        d.step[op.attrs.axes[j]] = op.attrs.steps[j];
      }
      CUDA_CHECK(slice(es, ptr(x), ptr(y), d, s));
      return Status::kOk;
    }
    case OpType::kGather: {
      const auto dd = dims(x);
      const size_t axis = size_t(op.attrs.axis);
      GatherDesc d;
      d.outer = prod(dd, 0, axis);
      d.len = dd[axis];
      d.inner = prod(dd, axis + 1);
      d.nidx = prod(dims(op.inputs[1]));
      CUDA_CHECK(gather(es, plan.tensors[op.inputs[1]].dtype == DType::kInt64, ptr(x), ptr(op.inputs[1]), ptr(y), d, env.err, tag, s));
      return Status::kOk;
    }
    case OpType::kGatherND: {
      const auto dd = dims(x), id = dims(op.inputs[1]);
      GatherNDDesc d;
      d.r = int(id.back());
      d.tuples = prod(id, 0, id.size() - 1);
      d.slice = prod(dd, size_t(d.r));
      int64_t st = d.slice;
      for (int j = d.r - 1; j >= 0; --j) {
        d.dims[j] = dd[size_t(j)];
        d.stride[j] = st;
        st *= dd[size_t(j)];
      }
      CUDA_CHECK(gather_nd(es, plan.tensors[op.inputs[1]].dtype == DType::kInt64, ptr(x), ptr(op.inputs[1]), ptr(y), d, env.err, tag, s));
      return Status::kOk;
    }
    case OpType::kGatherElements: {
      const auto dd = dims(x), id = dims(op.inputs[1]);
      GatherElementsDesc d;
      d.rank = int(dd.size());
      d.axis = op.attrs.axis;
      d.len = dd[size_t(d.axis)];
      int64_t st = 1;
      for (int i = d.rank - 1; i >= 0; --i) {
        d.out_dims[i] = id[size_t(i)];
        d.data_stride[i] = st;
        st *= dd[size_t(i)];
      }
      CUDA_CHECK(gather_elements(es, plan.tensors[op.inputs[1]].dtype == DType::kInt64, ptr(x), ptr(op.inputs[1]), ptr(y), d,
                                 env.err, tag, s));
      return Status::kOk;
    }
    case OpType::kCumSum: {
      const auto xd = dims(x);
      const size_t axis = size_t(op.attrs.axis);
      CumSumDesc d;
      d.outer = prod(xd, 0, axis);
      d.len = xd[axis];
      d.inner = prod(xd, axis + 1);
      d.exclusive = op.attrs.exclusive;
      d.reverse = op.attrs.reverse;
      CUDA_CHECK(cumsum(elem(x), ptr(x), ptr(y), d, s));
      return Status::kOk;
    }
    case OpType::kConcat: {
      const auto yd = dims(y);
      const size_t axis = size_t(op.attrs.axis);
      const int64_t outer = prod(yd, 0, axis), inner = prod(yd, axis + 1);
      int64_t at = 0;
      for (int32_t id : op.inputs) {
        const int64_t xdim = dims(id)[axis];
        if (plan.tensors[id].is_weight())  // [1, ...] beside a batch-first output: the same rows for every sample
          CUDA_CHECK(concat_repeat_part_bytes(es, ptr(id), ptr(y), outer, prod(yd, 1, axis), xdim, yd[axis], at, inner, s));
        else
          CUDA_CHECK(concat_part_bytes(es, ptr(id), ptr(y), outer, xdim, yd[axis], at, inner, s));
        at += xdim;
      }
      return Status::kOk;
    }
    default:
      return unsupported(op, "not a data op", message);
  }
}

}  // namespace memlane::cuda
