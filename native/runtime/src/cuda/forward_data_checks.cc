// The checks of the ops of any dtype with the batch at any axis (plan v2), made once at
// prepare on the plan's shapes: those of the CPU backend's dtype-aware factories
// (cpu/binary.cc, elementwise.cc, gather.cc, gather_nd.cc, gather_elements.cc, cumsum.cc,
// slice.cc, shape_ops.cc's copy and Concat, transpose_any.cc), and cpu_backend.cc's contract for
// the float kernels. Whatever the CPU backend refuses is refused here, naming why;
// forward_data.cc's launchers trust the rest.
#include <algorithm>
#include <cstdlib>

#include "forward_util.h"

namespace memlane::cuda {

bool is_binary_op(OpType t) {
  switch (t) {
    case OpType::kAdd: case OpType::kSub: case OpType::kMul: case OpType::kDiv: case OpType::kMod:
    case OpType::kMax: case OpType::kMin: case OpType::kEqual: case OpType::kLess: case OpType::kGreater:
    case OpType::kLessOrEqual: case OpType::kGreaterOrEqual: case OpType::kAnd: case OpType::kOr:
    case OpType::kPRelu:
      return true;
    default:
      return false;
  }
}

namespace {

// numpy broadcasting on plan shapes (cpu/broadcast.h Broadcast::init): inputs right-aligned,
// each dim equal to the output's (a batch dim -k to the same -k) or 1.
bool broadcasts(const TensorInfo& y, const std::vector<const TensorInfo*>& xs, std::string* why) {
  const size_t r = y.shape.size();
  if (r > size_t(kMaxDataRank)) return *why = "rank above 8 in " + shape_str(y.shape), false;
  for (const TensorInfo* x : xs) {
    if (x->shape.size() > r) return *why = "input " + shape_str(x->shape) + " has a higher rank than the output " + shape_str(y.shape), false;
    for (size_t i = 0; i < x->shape.size(); ++i) {
      const int64_t d = x->shape[i], o = y.shape[i + r - x->shape.size()];
      if (d != o && d != 1) return *why = "input " + shape_str(x->shape) + " does not broadcast to " + shape_str(y.shape), false;
    }
  }
  return true;
}

Status check_binary(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  if (!has_inputs(op, 2, 2)) return bad("expects 2 inputs");
  const TensorInfo &A = plan.tensors[op.inputs[0]], &B = plan.tensors[op.inputs[1]], &Y = plan.tensors[op.outputs[0]];
  const DType t = A.dtype;
  if (B.dtype != t) return bad(std::string("inputs differ in dtype: ") + dtype_name(t) + " and " + dtype_name(B.dtype));
  const bool order = op.type == OpType::kLess || op.type == OpType::kGreater || op.type == OpType::kLessOrEqual ||
                     op.type == OpType::kGreaterOrEqual;
  const bool pred = order || op.type == OpType::kEqual || op.type == OpType::kAnd || op.type == OpType::kOr;
  if (pred ? Y.dtype != DType::kBool : Y.dtype != t)
    return bad(std::string("output dtype ") + dtype_name(Y.dtype) + " does not fit inputs of " + dtype_name(t));
  if ((op.type == OpType::kAnd || op.type == OpType::kOr) && t != DType::kBool) return bad("And/Or take bool");
  if (order && t == DType::kBool) return bad("no bool ordering");
  if (!pred && t == DType::kBool) return bad("no bool arithmetic");
  if (op.type == OpType::kPRelu && t != DType::kFloat32) return bad(std::string("PRelu computes on float32, not ") + dtype_name(t));
  std::string why;
  if (!broadcasts(Y, {&A, &B}, &why)) return bad(why);
  return Status::kOk;
}

Status check_gather(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  if (!has_inputs(op, 2, 2)) return bad("expects 2 inputs");
  const TensorInfo &D = plan.tensors[op.inputs[0]], &I = plan.tensors[op.inputs[1]], &Y = plan.tensors[op.outputs[0]];
  if (I.dtype != DType::kInt64 && I.dtype != DType::kInt32) return bad(std::string("indices are ") + dtype_name(I.dtype));
  if (op.type == OpType::kGatherND) {
    const int64_t r = I.shape.empty() ? -1 : I.shape.back();
    if (r < 1 || r > int64_t(D.shape.size()) || r > kMaxDataRank)
      return bad("the indices' last dim must be 1..rank of data " + shape_str(D.shape) + "; indices " + shape_str(I.shape));
    std::vector<int64_t> want(I.shape.begin(), I.shape.end() - 1);
    want.insert(want.end(), D.shape.begin() + r, D.shape.end());
    if (Y.dtype != D.dtype || Y.shape != want)
      return bad("output " + shape_str(Y.shape) + " is not indices[:-1] + data[r:] of data " + shape_str(D.shape) +
                 " and indices " + shape_str(I.shape));
    return Status::kOk;
  }
  const int axis = op.attrs.axis;
  if (axis < 0 || axis >= int(D.shape.size())) return bad("axis " + std::to_string(axis) + " out of range for " + shape_str(D.shape));
  // The batch on the gathered axis: a flat table the run-time indices address (cpu gather.cc).
  const bool batchTable = D.shape[size_t(axis)] < 0 && !I.is_weight();
  if (D.shape[size_t(axis)] < 0 && !batchTable) return bad("gathering along the batch axis with constant indices");
  if (!D.is_weight() && !I.is_weight() && !batchTable) return bad("data and indices both hold the batch");
  if (Y.dtype != D.dtype || Y.elements() != D.elements() / std::abs(D.shape[size_t(axis)]) * I.elements())
    return bad("output " + shape_str(Y.shape) + " does not fit data " + shape_str(D.shape) + " and indices " + shape_str(I.shape));
  return Status::kOk;
}

// cpu/gather_elements.cc: one rank, every dim but `axis` of the indices the data's or a fixed
// one no larger; the output the indices' shape in the data's dtype.
Status check_gather_elements(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  if (!has_inputs(op, 2, 2)) return bad("expects 2 inputs");
  const TensorInfo &D = plan.tensors[op.inputs[0]], &I = plan.tensors[op.inputs[1]], &Y = plan.tensors[op.outputs[0]];
  if (I.dtype != DType::kInt64 && I.dtype != DType::kInt32) return bad(std::string("indices are ") + dtype_name(I.dtype));
  const size_t rank = D.shape.size();
  const int axis = op.attrs.axis;
  if (rank < 1 || rank > size_t(kMaxDataRank) || I.shape.size() != rank || axis < 0 || axis >= int(rank))
    return bad("data " + shape_str(D.shape) + " and indices " + shape_str(I.shape) + " must share a rank of 1..8 with axis " +
               std::to_string(axis) + " in it");
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = D.shape[i], k = I.shape[i];
    if (int(i) != axis && k != d && (k < 0 || d < 0 || k > d))
      return bad("indices " + shape_str(I.shape) + " exceed data " + shape_str(D.shape) + " on axis " + std::to_string(i));
  }
  if (Y.dtype != D.dtype || Y.shape != I.shape)
    return bad("output " + shape_str(Y.shape) + " is not the indices' shape " + shape_str(I.shape) + " in the data's dtype");
  return Status::kOk;
}

// cpu/cumsum.cc: a float32, int64 or int32 activation, the output its shape and dtype.
Status check_cumsum(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  if (!has_inputs(op, 1, 1)) return bad("expects 1 input");
  const TensorInfo &X = plan.tensors[op.inputs[0]], &Y = plan.tensors[op.outputs[0]];
  if (X.is_weight()) return bad("input must be an activation");
  if (X.dtype != DType::kFloat32 && X.dtype != DType::kInt64 && X.dtype != DType::kInt32)
    return bad(std::string("input is ") + dtype_name(X.dtype) + "; CumSum sums float32, int64 or int32");
  if (op.attrs.axis < 0 || op.attrs.axis >= int(X.shape.size()))
    return bad("axis " + std::to_string(op.attrs.axis) + " out of range for " + shape_str(X.shape));
  if (Y.dtype != X.dtype || Y.shape != X.shape) return bad("output " + shape_str(Y.shape) + " differs from input " + shape_str(X.shape));
  return Status::kOk;
}

Status check_slice(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  if (!has_inputs(op, 1, 1)) return bad("expects 1 input");
  const TensorInfo &X = plan.tensors[op.inputs[0]], &Y = plan.tensors[op.outputs[0]];
  const int r = int(X.shape.size());
  if (r < 1 || r > kMaxDataRank || Y.shape.size() != X.shape.size() || X.dtype != Y.dtype)
    return bad("input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " must share rank (<= 8) and dtype");
  const OpAttrs& a = op.attrs;
  if (a.starts.size() != a.axes.size() || a.steps.size() != a.axes.size()) return bad("starts, steps and axes differ in number");
  for (size_t j = 0; j < a.axes.size(); ++j) {
    const int64_t ax = a.axes[j], d = ax >= 0 && ax < r ? X.shape[size_t(ax)] : -1, n = ax >= 0 && ax < r ? Y.shape[size_t(ax)] : -1;
    const int64_t s = a.starts[j], p = a.steps[j];
    if (d < 1 || n < 1 || p == 0 || s < 0 || s >= d || s + (n - 1) * p < 0 || s + (n - 1) * p >= d)
      return bad("axis " + std::to_string(ax) + " start " + std::to_string(s) + " step " + std::to_string(p) + " does not fit " +
                 shape_str(X.shape) + " -> " + shape_str(Y.shape));
  }
  for (int i = 0; i < r; ++i)
    if (X.shape[size_t(i)] != Y.shape[size_t(i)] && std::find(a.axes.begin(), a.axes.end(), int64_t(i)) == a.axes.end())
      return bad("axis " + std::to_string(i) + " changes size but is not sliced");
  return Status::kOk;
}

Status check_concat(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  const TensorInfo& Y = plan.tensors[op.outputs[0]];
  const int axis = op.attrs.axis, r = int(Y.shape.size()), bax = Y.batch_axis();
  if (r > kMaxDataRank || axis < 0 || axis >= r || axis == bax)
    return bad("axis " + std::to_string(axis) + " out of range for " + shape_str(Y.shape) + " (or the batch axis)");
  int64_t total = 0;
  for (int32_t id : op.inputs) {
    if (id == kAbsentInput) return bad("absent input");
    const TensorInfo& X = plan.tensors[id];
    if (X.dtype != Y.dtype) return bad(std::string("input dtype ") + dtype_name(X.dtype) + " differs from the output's " + dtype_name(Y.dtype));
    if (int(X.shape.size()) != r || (X.is_weight() && (X.shape[0] != 1 || bax != 0)))
      return bad("inputs must be activations, or weights [1, ...] beside a batch-first output, of the output's rank; found " + shape_str(X.shape));
    for (int i = 0; i < r; ++i)
      if (i != axis && X.shape[size_t(i)] != Y.shape[size_t(i)] && !(X.is_weight() && i == 0))
        return bad("input " + shape_str(X.shape) + " does not fit " + shape_str(Y.shape));
    total += X.shape[size_t(axis)];
  }
  if (total != Y.shape[size_t(axis)]) return bad("inputs do not add up to the output's axis");
  return Status::kOk;
}

}  // namespace

Status check_float_layout(const Plan& plan, const Op& op, std::string* message) {
  bool layout_free = false;
  switch (op.type) {
    case OpType::kRelu: case OpType::kLeakyRelu: case OpType::kSigmoid: case OpType::kTanh: case OpType::kErf:
    case OpType::kGelu: case OpType::kPow: case OpType::kSqrt: case OpType::kReciprocal: case OpType::kExp:
    case OpType::kNeg: case OpType::kLog: case OpType::kAbs: case OpType::kSin: case OpType::kCos: case OpType::kClip: case OpType::kHardSigmoid:
    case OpType::kTan: case OpType::kAsin: case OpType::kAcos: case OpType::kAtan: case OpType::kSinh:
    case OpType::kCosh: case OpType::kAsinh: case OpType::kAcosh: case OpType::kAtanh:
    case OpType::kElu: case OpType::kSelu: case OpType::kCelu: case OpType::kSoftplus: case OpType::kSoftsign:
    case OpType::kMish: case OpType::kThresholdedRelu:
    case OpType::kHardSwish: case OpType::kSiLU:
    // Row ops: the batch anywhere outside a row (their checks in forward.cc say where).
    case OpType::kGemm: case OpType::kMatMul: case OpType::kSoftmax: case OpType::kLogSoftmax: case OpType::kLayerNorm:
      layout_free = true;
      break;
    default:
      break;
  }
  std::vector<int32_t> ids = op.inputs;
  ids.insert(ids.end(), op.outputs.begin(), op.outputs.end());
  for (int32_t id : ids) {
    if (id == kAbsentInput) continue;
    const TensorInfo& t = plan.tensors[size_t(id)];
    if (t.dtype != DType::kFloat32)
      return unsupported(op, "tensor '" + t.name + "' is " + dtype_name(t.dtype) + "; this kernel computes on float32 only", message);
    if (!layout_free && !t.is_weight() && !t.batch_first())
      return unsupported(op, "tensor '" + t.name + "' has shape " + shape_str(t.shape) + "; this kernel needs the batch first", message);
  }
  return Status::kOk;
}

bool is_data_op(OpType t) {
  if (is_binary_op(t)) return true;
  switch (t) {
    case OpType::kWhere: case OpType::kExpand: case OpType::kCast: case OpType::kNot: case OpType::kGather:
    case OpType::kGatherND: case OpType::kSlice: case OpType::kRange: case OpType::kConstantOfShape:
    case OpType::kReshape: case OpType::kConcat: case OpType::kTranspose:
    case OpType::kGatherElements: case OpType::kCumSum:
      return true;
    default:
      return false;
  }
}

Status check_data_op(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  if (is_binary_op(op.type)) return check_binary(plan, op, message);
  const TensorInfo& Y = plan.tensors[op.outputs[0]];
  std::string why;
  switch (op.type) {
    case OpType::kRange: case OpType::kConstantOfShape:
      return Status::kOk;  // the output alone: per-sample elements x batch values
    case OpType::kGather: case OpType::kGatherND:
      return check_gather(plan, op, message);
    case OpType::kGatherElements:
      return check_gather_elements(plan, op, message);
    case OpType::kCumSum:
      return check_cumsum(plan, op, message);
    case OpType::kSlice:
      return check_slice(plan, op, message);
    case OpType::kConcat:
      return check_concat(plan, op, message);
    default: break;
  }
  if (op.inputs.empty() || op.inputs[0] == kAbsentInput) return bad("input 0 is absent");
  const TensorInfo& X = plan.tensors[op.inputs[0]];
  switch (op.type) {
    case OpType::kWhere: {
      if (!has_inputs(op, 3, 3)) return bad("expects 3 inputs");
      const TensorInfo &T = plan.tensors[op.inputs[1]], &F = plan.tensors[op.inputs[2]];
      if (X.dtype != DType::kBool || F.dtype != T.dtype || Y.dtype != T.dtype)
        return bad("needs a bool condition and x, y, output of one dtype");
      if (!broadcasts(Y, {&X, &T, &F}, &why)) return bad(why);
      return Status::kOk;
    }
    case OpType::kExpand:
      if (!has_inputs(op, 1, 1)) return bad("expects 1 input");
      if (X.dtype != Y.dtype) return bad("input and output differ in dtype");
      if (!broadcasts(Y, {&X}, &why)) return bad(why);
      return Status::kOk;
    case OpType::kCast: case OpType::kNot:
      if (!has_inputs(op, 1, 1)) return bad("expects 1 input");
      if (X.is_weight() || X.elements() != Y.elements()) return bad("needs an activation of the output's size");
      if (op.type == OpType::kNot && (X.dtype != DType::kBool || Y.dtype != DType::kBool)) return bad("Not takes and gives bool");
      if (op.type == OpType::kCast && Y.dtype != op.attrs.to) return bad("output dtype differs from `to`");
      return Status::kOk;
    case OpType::kReshape:  // Squeeze / Unsqueeze too: the same bytes, any dtype and layout
      if (!has_inputs(op, 1, 2)) return bad("expects 1..2 inputs");
      if (X.is_weight()) return bad("input must be an activation");
      if (X.elements() != Y.elements() || X.dtype != Y.dtype)
        return bad("input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ in elements per sample or dtype");
      return Status::kOk;
    case OpType::kTranspose: {  // any permutation over the resolved dims (cpu transpose_any.cc), float32
      if (!has_inputs(op, 1, 1)) return bad("expects 1 input");
      const auto& perm = op.attrs.perm;
      const size_t r = X.shape.size();
      if (X.is_weight() || X.dtype != DType::kFloat32 || Y.dtype != DType::kFloat32 || r < 1 || r > size_t(kMaxRank) ||
          perm.size() != r || Y.shape.size() != r)
        return bad("needs a float32 activation of rank 1..6 and a perm of its rank; X " + shape_str(X.shape));
      bool seen[kMaxRank] = {};
      for (size_t i = 0; i < r; ++i) {
        if (perm[i] < 0 || size_t(perm[i]) >= r || seen[perm[i]]) return bad("perm is not a permutation");
        seen[perm[i]] = true;
        if (Y.shape[i] != X.shape[size_t(perm[i])]) return bad("output shape " + shape_str(Y.shape) + " does not match perm");
      }
      return Status::kOk;
    }
    default:
      return bad("not a data op");
  }
}

}  // namespace memlane::cuda
