#include "forward.h"

#include <algorithm>

#include "cuda_check.h"

namespace memlane::cuda {
namespace {

std::vector<int64_t> dims_of(const TensorInfo& t, int64_t batch) {
  std::vector<int64_t> d = t.shape;
  if (!t.is_weight() && !d.empty()) d[0] = batch;
  return d;
}
int64_t prod(const std::vector<int64_t>& d, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < d.size() && i < to; ++i) n *= d[i];
  return n;
}

// memlane_cuda must not need memlane_core (which links it): its own op names, not
// op_type_name() from plan/op_names.cc, or a static link would depend on library order.
const char* name_of(OpType t) {
  static const char* const kNames[] = {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div",
                                       "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu",
                                       "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten",
                                       "Reshape", "Transpose", "Concat", "Softmax"};
  const size_t i = static_cast<size_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

Status unsupported(const Op& op, const std::string& why, std::string* message) {
  *message = std::string("cuda backend: op '") + op.name + "' (" + name_of(op.type) + "): " + why;
  return Status::kUnsupportedOp;
}

ConvDesc conv_desc(const Plan& plan, const Op& op, int64_t batch) {
  const auto x = dims_of(plan.tensors[op.inputs[0]], batch);
  const auto w = plan.tensors[op.inputs[1]].shape;
  const auto y = dims_of(plan.tensors[op.outputs[0]], batch);
  ConvDesc d;
  d.N = batch; d.C = x[1]; d.H = x[2]; d.W = x[3];
  d.M = w[0]; d.OH = y[2]; d.OW = y[3];
  const OpAttrs& a = op.attrs;
  d.kh = a.kernel[0]; d.kw = a.kernel[1]; d.sh = a.strides[0]; d.sw = a.strides[1];
  d.ph = a.pads[0]; d.pw = a.pads[1]; d.dh = a.dilations[0]; d.dw = a.dilations[1];
  d.group = a.group;
  d.relu = a.activation == Activation::kRelu;
  return d;
}

PoolDesc pool_desc(const Plan& plan, const Op& op, int64_t batch) {
  const auto x = dims_of(plan.tensors[op.inputs[0]], batch);
  const auto y = dims_of(plan.tensors[op.outputs[0]], batch);
  const OpAttrs& a = op.attrs;
  PoolDesc d;
  d.NC = x[0] * x[1]; d.H = x[2]; d.W = x[3]; d.OH = y[2]; d.OW = y[3];
  d.kh = a.kernel[0]; d.kw = a.kernel[1]; d.sh = a.strides[0]; d.sw = a.strides[1];
  d.pt = a.pads[0]; d.pl = a.pads[1]; d.pb = a.pads[2]; d.pr = a.pads[3];
  d.dh = a.dilations[0]; d.dw = a.dilations[1];
  d.countIncludePad = a.countIncludePad;
  return d;
}

bool broadcast_desc(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                    const std::vector<int64_t>& y, BroadcastDesc* d) {
  const int r = static_cast<int>(y.size());
  if (r > kMaxRank || a.size() > y.size() || b.size() > y.size()) return false;
  d->rank = r;
  auto strides = [&](const std::vector<int64_t>& s, int64_t* out) {
    const int off = r - static_cast<int>(s.size());
    int64_t st = 1;
    for (int i = r - 1; i >= 0; --i) {
      const int64_t dim = i >= off ? s[i - off] : 1;
      if (dim != 1 && dim != y[i]) return false;
      out[i] = dim == 1 ? 0 : st;
      st *= dim;
    }
    return true;
  };
  for (int i = 0; i < r; ++i) d->out_dims[i] = y[i];
  return strides(a, d->a_strides) && strides(b, d->b_strides);
}

bool is_weight(const Plan& p, int32_t id) { return id >= 0 && p.tensors[id].is_weight(); }

// dry: check and compute descriptors only.
Status run_op(const ForwardEnv& env, const Op& op, int64_t batch, cudaStream_t s, bool dry,
              std::string* message) {
  const Plan& plan = *env.plan;
  const Prec p = env.prec;
  auto ptr = [&](int32_t id) -> void* { return dry ? nullptr : tensor_ptr(env, id, batch); };
  auto in = [&](size_t i) { return op.inputs.size() > i ? op.inputs[i] : kAbsentInput; };
  if (op.inputs.empty() || op.outputs.size() != 1) return unsupported(op, "expects inputs and one output", message);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] >= static_cast<int32_t>(plan.tensors.size())) return unsupported(op, "input id out of range", message);
  const TensorInfo& xt = plan.tensors[op.inputs[0]];
  const TensorInfo& yt = plan.tensors[op.outputs[0]];
  const int64_t n_out = batch * yt.elements();
  const bool x_weight = xt.is_weight();
  int blas_status = 0;
  auto blas_fail = [&](cudaError_t e, const char* what) -> Status {
    if (blas_status != 0) {
      *message = std::string(what) + ": cuBLAS status " + std::to_string(blas_status) + " in op '" + op.name + "'";
      return Status::kInternal;
    }
    *message = std::string(what) + " failed: " + cudaGetErrorString(e) + " in op '" + op.name + "'";
    return status_of(e);
  };
  switch (op.type) {
    case OpType::kConv: {
      if (xt.shape.size() != 4) return unsupported(op, "only 2-D convolution", message);
      if (!is_weight(plan, in(1))) return unsupported(op, "weights must be constant", message);
      if (in(2) != kAbsentInput && !is_weight(plan, in(2))) return unsupported(op, "bias must be constant", message);
      ConvDesc d = conv_desc(plan, op, batch);
      if (d.group < 1 || d.C % d.group || d.M % d.group) return unsupported(op, "bad group", message);
      if (dry) return Status::kOk;
      cudaError_t e = conv2d(*env.blas, env.blasHandle, p, ptr(in(0)), ptr(in(1)),
                             in(2) == kAbsentInput ? nullptr : ptr(in(2)), ptr(op.outputs[0]),
                             env.col, env.colElems, d, s, &blas_status);
      if (e != cudaSuccess) return blas_fail(e, "conv2d");
      return Status::kOk;
    }
    case OpType::kGemm:
    case OpType::kMatMul: {
      const bool gemm_op = op.type == OpType::kGemm;
      if (x_weight) return unsupported(op, "A must be an activation", message);
      if (!is_weight(plan, in(1))) return unsupported(op, "B must be constant", message);
      if (gemm_op && op.attrs.transA) return unsupported(op, "transA on the batch operand", message);
      const auto& bs = plan.tensors[in(1)].shape;
      if (bs.size() != 2) return unsupported(op, "B must be 2-D", message);
      GemmDesc d;
      d.transB = gemm_op && op.attrs.transB;
      d.K = d.transB ? bs[1] : bs[0];
      d.N = d.transB ? bs[0] : bs[1];
      const auto xd = dims_of(xt, batch);
      if (xd.back() != d.K) return unsupported(op, "inner dimensions differ", message);
      d.rows = prod(xd) / d.K;
      if (gemm_op) {
        d.alpha = op.attrs.alpha;
        d.beta = op.attrs.beta;
        d.relu = op.attrs.activation == Activation::kRelu;
        if (in(2) != kAbsentInput) {
          if (!is_weight(plan, in(2))) return unsupported(op, "C must be constant", message);
          d.c_len = plan.tensors[in(2)].elements();
          if (d.c_len != 1 && d.c_len != d.N) return unsupported(op, "C must broadcast over rows", message);
        }
      }
      if (dry) return Status::kOk;
      cudaError_t e = gemm(*env.blas, env.blasHandle, p, ptr(in(0)), ptr(in(1)),
                           d.c_len ? ptr(in(2)) : nullptr, ptr(op.outputs[0]), d, s, &blas_status);
      if (e != cudaSuccess) return blas_fail(e, "gemm");
      return Status::kOk;
    }
    case OpType::kAdd: case OpType::kSub: case OpType::kMul: case OpType::kDiv: {
      if (op.inputs.size() != 2) return unsupported(op, "expects two inputs", message);
      BroadcastDesc d;
      if (!broadcast_desc(dims_of(xt, batch), dims_of(plan.tensors[in(1)], batch), dims_of(yt, batch), &d))
        return unsupported(op, "shapes do not broadcast (or rank > 6)", message);
      if (dry) return Status::kOk;
      const BinaryKind k = op.type == OpType::kAdd ? BinaryKind::kAdd
                           : op.type == OpType::kSub ? BinaryKind::kSub
                           : op.type == OpType::kMul ? BinaryKind::kMul : BinaryKind::kDiv;
      CUDA_CHECK(binary(k, p, ptr(in(0)), ptr(in(1)), ptr(op.outputs[0]), d, s));
      return Status::kOk;
    }
    default: break;
  }
  if (x_weight) return unsupported(op, "input must be an activation", message);
  switch (op.type) {
    case OpType::kRelu: case OpType::kLeakyRelu: case OpType::kSigmoid: case OpType::kTanh:
    case OpType::kErf: case OpType::kGelu: {
      if (dry) return Status::kOk;
      UnaryKind k = op.type == OpType::kRelu ? UnaryKind::kRelu
                    : op.type == OpType::kLeakyRelu ? UnaryKind::kLeakyRelu
                    : op.type == OpType::kSigmoid ? UnaryKind::kSigmoid
                    : op.type == OpType::kTanh ? UnaryKind::kTanh
                    : op.type == OpType::kErf ? UnaryKind::kErf
                    : op.attrs.geluTanh ? UnaryKind::kGeluTanh : UnaryKind::kGelu;
      CUDA_CHECK(unary(k, op.attrs.alpha, p, ptr(in(0)), ptr(op.outputs[0]), n_out, s));
      return Status::kOk;
    }
    case OpType::kMaxPool: case OpType::kAveragePool: {
      if (xt.shape.size() != 4) return unsupported(op, "only 2-D pooling", message);
      if (dry) return Status::kOk;
      PoolDesc d = pool_desc(plan, op, batch);
      if (op.type == OpType::kMaxPool) CUDA_CHECK(maxpool2d(p, ptr(in(0)), ptr(op.outputs[0]), d, s));
      else CUDA_CHECK(avgpool2d(p, ptr(in(0)), ptr(op.outputs[0]), d, s));
      return Status::kOk;
    }
    case OpType::kGlobalAveragePool: {
      const auto xd = dims_of(xt, batch);
      if (xd.size() < 3) return unsupported(op, "expects [N, C, spatial...]", message);
      if (dry) return Status::kOk;
      CUDA_CHECK(global_avgpool(p, ptr(in(0)), ptr(op.outputs[0]), xd[0] * xd[1], prod(xd, 2), s));
      return Status::kOk;
    }
    case OpType::kFlatten: case OpType::kReshape: {
      if (dry) return Status::kOk;
      void* x = ptr(in(0));
      void* y = ptr(op.outputs[0]);
      if (x != y)
        CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(n_out) * prec_bytes(p), cudaMemcpyDeviceToDevice, s));
      return Status::kOk;
    }
    case OpType::kTranspose: {
      const auto xd = dims_of(xt, batch);
      if (xd.size() > static_cast<size_t>(kMaxRank) || op.attrs.perm.size() != xd.size())
        return unsupported(op, "perm rank differs from input rank (or rank > 6)", message);
      if (dry) return Status::kOk;
      CUDA_CHECK(transpose(p, ptr(in(0)), ptr(op.outputs[0]), static_cast<int>(xd.size()), xd.data(),
                           op.attrs.perm.data(), s));
      return Status::kOk;
    }
    case OpType::kConcat: {
      const auto yd = dims_of(yt, batch);
      const size_t axis = static_cast<size_t>(op.attrs.axis);
      if (axis < 1 || axis >= yd.size()) return unsupported(op, "axis out of range", message);
      for (int32_t id : op.inputs)
        if (id < 0 || is_weight(plan, id)) return unsupported(op, "inputs must be activations", message);
      if (dry) return Status::kOk;
      const int64_t outer = prod(yd, 0, axis), inner = prod(yd, axis + 1);
      int64_t at = 0;
      for (int32_t id : op.inputs) {
        const int64_t xdim = dims_of(plan.tensors[id], batch)[axis];
        CUDA_CHECK(concat_part(p, ptr(id), ptr(op.outputs[0]), outer, xdim, yd[axis], at, inner, s));
        at += xdim;
      }
      return Status::kOk;
    }
    case OpType::kSoftmax: {
      const auto xd = dims_of(xt, batch);
      const size_t axis = static_cast<size_t>(op.attrs.axis);
      if (axis < 1 || axis >= xd.size()) return unsupported(op, "axis out of range", message);
      if (dry) return Status::kOk;
      CUDA_CHECK(softmax(p, ptr(in(0)), ptr(op.outputs[0]), prod(xd, 0, axis), xd[axis], prod(xd, axis + 1), s));
      return Status::kOk;
    }
    default:
      return unsupported(op, "not implemented", message);
  }
}

}  // namespace

void* tensor_ptr(const ForwardEnv& env, int32_t id, int64_t batch) {
  const TensorInfo& t = env.plan->tensors[id];
  if (t.is_weight()) return (*env.weights)[id];
  // Per-sample offsets are planned for float32; elements scale to the chosen precision.
  const uint64_t elem_offset = static_cast<uint64_t>(batch) * (t.offset / 4);
  return env.arena + elem_offset * prec_bytes(env.prec);
}

int64_t max_col_elems_per_sample(const Plan& plan) {
  int64_t m = 0;
  for (const Op& op : plan.ops)
    if (op.type == OpType::kConv && op.inputs.size() >= 2 && plan.tensors[op.inputs[0]].shape.size() == 4)
      m = std::max(m, conv_col_elems_per_sample(conv_desc(plan, op, 1)));
  return m;
}

Status validate_plan(const Plan& plan, std::string* message) {
  ForwardEnv env;
  env.plan = &plan;
  for (const Op& op : plan.ops) {
    Status s = run_op(env, op, 1, nullptr, true, message);
    if (s != Status::kOk) return s;
  }
  return Status::kOk;
}

Status enqueue_forward(const ForwardEnv& env, int64_t batch, cudaStream_t s, std::string* message) {
  for (const Op& op : env.plan->ops) {
    Status st = run_op(env, op, batch, s, false, message);
    if (st != Status::kOk) return st;
  }
  return Status::kOk;
}

}  // namespace memlane::cuda
