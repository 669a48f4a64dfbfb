#include "forward.h"

#include <algorithm>

#include "cuda_check.h"
#include "forward_util.h"
#include "transformer_desc.h"

namespace memlane::cuda {

// memlane_cuda must not need memlane_core (which links it): its own op names, not
// op_type_name() from plan/op_names.cc, or a static link would depend on library order.
const char* op_name(OpType t) {
  static const char* const kNames[] = {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div",
                                       "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu",
                                       "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten",
                                       "Reshape", "Transpose", "Concat", "Softmax",
                                       "LayerNormalization", "Pow", "Sqrt", "Reciprocal", "Exp", "Neg",
                                       "Log", "Abs", "ReduceMean", "ReduceSum", "ReduceMax", "Attention",
                                       "Gather", "Cast", "Where", "Equal", "Less", "Greater", "Not", "And",
                                       "Or", "Mod", "Expand", "Slice", "Range", "ConstantOfShape",
                                       "LessOrEqual", "GreaterOrEqual", "Clip", "HardSigmoid", "HardSwish", "SiLU", "Pad",
                                       "Split", "LSTM", "Max", "Min", "GatherND", "CumSum", "GatherElements", "Sin", "Cos", "ArgMax",
                                       "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "ThresholdedRelu",
                                       "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                                       "PRelu", "ConvTranspose", "LogSoftmax", "GRU", "TopK"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(OpType::kTopK) + 1,
                "one name per OpType, in enum order (plan/plan.h)");
  const size_t i = static_cast<size_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

Status unsupported(const Op& op, const std::string& why, std::string* message) {
  *message = std::string("cuda backend: op '") + op.name + "' (" + op_name(op.type) + "): " + why;
  return Status::kUnsupportedOp;
}

// The math.cu function of each elementwise math op (forward.cc's checks admit only these).
MathKind math_kind(OpType t) {
  switch (t) {
    case OpType::kPow: return MathKind::kPow;
    case OpType::kSqrt: return MathKind::kSqrt;
    case OpType::kReciprocal: return MathKind::kReciprocal;
    case OpType::kExp: return MathKind::kExp;
    case OpType::kNeg: return MathKind::kNeg;
    case OpType::kLog: return MathKind::kLog;
    case OpType::kSin: return MathKind::kSin;
    case OpType::kCos: return MathKind::kCos;
    case OpType::kTan: return MathKind::kTan;
    case OpType::kAsin: return MathKind::kAsin;
    case OpType::kAcos: return MathKind::kAcos;
    case OpType::kAtan: return MathKind::kAtan;
    case OpType::kSinh: return MathKind::kSinh;
    case OpType::kCosh: return MathKind::kCosh;
    case OpType::kAsinh: return MathKind::kAsinh;
    case OpType::kAcosh: return MathKind::kAcosh;
    case OpType::kAtanh: return MathKind::kAtanh;
    case OpType::kElu: return MathKind::kElu;
    case OpType::kSelu: return MathKind::kSelu;
    case OpType::kCelu: return MathKind::kCelu;
    case OpType::kSoftplus: return MathKind::kSoftplus;
    case OpType::kSoftsign: return MathKind::kSoftsign;
    case OpType::kMish: return MathKind::kMish;
    case OpType::kThresholdedRelu: return MathKind::kThresholdedRelu;
    default: return MathKind::kAbs;
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

namespace {

ConvDesc conv_desc(const Plan& plan, const Op& op, int64_t batch) {
  const auto x = dims_of(plan.tensors[op.inputs[0]], batch);
  const auto y = dims_of(plan.tensors[op.outputs[0]], batch);
  ConvDesc d;
  d.N = batch; d.C = x[1]; d.H = x[2]; d.W = x[3];
  d.M = y[1]; d.OH = y[2]; d.OW = y[3];  // the output's channels: a Conv's W[0], a ConvTranspose's group x W[1]
  const OpAttrs& a = op.attrs;
  d.kh = a.kernel[0]; d.kw = a.kernel[1]; d.sh = a.strides[0]; d.sw = a.strides[1];
  d.ph = a.pads[0]; d.pw = a.pads[1]; d.pb = a.pads[2]; d.pr = a.pads[3]; d.dh = a.dilations[0]; d.dw = a.dilations[1];
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
  // AveragePool has no dilations in the plan (cpu pool.cc uses 1 whatever the attr says).
  const bool mx = op.type == OpType::kMaxPool;
  d.dh = mx ? a.dilations[0] : 1; d.dw = mx ? a.dilations[1] : 1;
  d.countIncludePad = a.countIncludePad;
  return d;
}

bool is_weight(const Plan& p, int32_t id) { return id >= 0 && p.tensors[id].is_weight(); }

// The plan-level checks the CPU backend's factories make (native/runtime/src/cpu/*.cc), made
// once at prepare on the plan's per-sample shapes. The launchers trust these shapes (sizes,
// strides, output extents come from them), so whatever the CPU backend refuses, or would
// compute from other sizes, must be refused here rather than computed differently or
// written past a tensor's end in the arena.
Status check_cnn_op(const Plan& plan, const Op& op, std::string* message);

Status check_op(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  const auto need = [&](size_t min, size_t max) { return has_inputs(op, min, max); };
  const auto in_count = [&](size_t min, size_t max) {
    return bad("expects " + std::to_string(min) + ".." + std::to_string(max) + " inputs, has " +
               std::to_string(op.inputs.size()));
  };
  MEMLANE_TRY(check_float_layout(plan, op, message));
  const TensorInfo& X = plan.tensors[op.inputs[0]];
  const TensorInfo& Y = plan.tensors[op.outputs[0]];
  const OpAttrs& a = op.attrs;
  switch (op.type) {
    case OpType::kConv: {
      if (!need(2, 3)) return in_count(2, 3);
      const TensorInfo& W = plan.tensors[op.inputs[1]];
      if (X.is_weight() || !W.is_weight()) return bad("expects an activation X and a weight W");
      if (X.shape.size() != 4 || W.shape.size() != 4 || Y.shape.size() != 4)
        return bad("only 2-D convolution (rank-4 X, W, Y); X " + shape_str(X.shape) + ", W " + shape_str(W.shape));
      const int64_t C = X.shape[1], M = W.shape[0], g = a.group;
      if (g < 1 || C % g || M % g || W.shape[1] != C / g)
        return bad("group " + std::to_string(g) + " does not divide C and M with W " + shape_str(W.shape));
      if (W.shape[2] != a.kernel[0] || W.shape[3] != a.kernel[1]) return bad("kernel attr differs from W " + shape_str(W.shape));
      if (a.strides[0] < 1 || a.strides[1] < 1 || a.dilations[0] < 1 || a.dilations[1] < 1 || a.pads[0] < 0 ||
          a.pads[1] < 0 || a.pads[2] < 0 || a.pads[3] < 0)
        return bad("strides and dilations must be >= 1, pads >= 0");
      const int64_t eoh = (X.shape[2] + a.pads[0] + a.pads[2] - (int64_t(a.dilations[0]) * (a.kernel[0] - 1) + 1)) / a.strides[0] + 1;
      const int64_t eow = (X.shape[3] + a.pads[1] + a.pads[3] - (int64_t(a.dilations[1]) * (a.kernel[1] - 1) + 1)) / a.strides[1] + 1;
      if (Y.shape[1] != M || Y.shape[2] != eoh || Y.shape[3] != eow || eoh < 1 || eow < 1)
        return bad("output shape " + shape_str(Y.shape) + " differs from the computed [-1," + std::to_string(M) + "," +
                   std::to_string(eoh) + "," + std::to_string(eow) + "]");
      if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput &&
          (!plan.tensors[op.inputs[2]].is_weight() || plan.tensors[op.inputs[2]].elements() != M))
        return bad("bias must be a weight of M=" + std::to_string(M) + " elements");
      return Status::kOk;
    }
    case OpType::kConvTranspose: {
      if (!need(2, 3)) return in_count(2, 3);
      const TensorInfo& W = plan.tensors[op.inputs[1]];
      if (X.is_weight() || !W.is_weight()) return bad("expects an activation X and a weight W");
      if (X.shape.size() != 4 || Y.shape.size() != 4 || W.shape.size() != 5)
        return bad("X and Y must be rank 4 and W [group, M/group, kh, kw, C/group]; X " + shape_str(X.shape) + ", W " + shape_str(W.shape));
      const int64_t C = X.shape[1], M = Y.shape[1], g = a.group;
      if (g < 1 || C % g || M % g || W.shape != std::vector<int64_t>{g, M / g, a.kernel[0], a.kernel[1], C / g})
        return bad("W " + shape_str(W.shape) + " does not fit C " + std::to_string(C) + ", M " + std::to_string(M) + ", group " + std::to_string(g));
      if (a.strides[0] < 1 || a.strides[1] < 1 || a.dilations[0] < 1 || a.dilations[1] < 1)
        return bad("strides and dilations must be >= 1");
      const int64_t eoh = (X.shape[2] - 1) * a.strides[0] + int64_t(a.dilations[0]) * (a.kernel[0] - 1) + 1 - a.pads[0] - a.pads[2];
      const int64_t eow = (X.shape[3] - 1) * a.strides[1] + int64_t(a.dilations[1]) * (a.kernel[1] - 1) + 1 - a.pads[1] - a.pads[3];
      if (Y.shape[2] != eoh || Y.shape[3] != eow) return bad("output shape " + shape_str(Y.shape) + " differs from the window's");
      if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput &&
          (!plan.tensors[op.inputs[2]].is_weight() || plan.tensors[op.inputs[2]].elements() != M))
        return bad("bias must be a weight of M=" + std::to_string(M) + " elements");
      return Status::kOk;
    }
    case OpType::kGemm:
    case OpType::kMatMul: {
      const bool gemm = op.type == OpType::kGemm;
      if (gemm ? !need(2, 3) : !need(2, 2)) return gemm ? in_count(2, 3) : in_count(2, 2);
      const TensorInfo& B = plan.tensors[op.inputs[1]];
      if (!gemm && (X.is_weight() || !B.is_weight() || B.shape.size() != 2)) {
        BatchedMatMulDesc d;
        std::string why;
        if (!batched_desc(plan, op, 1, &d, &why)) return bad(why);
        return Status::kOk;
      }
      if (X.is_weight() || !B.is_weight() || B.shape.size() != 2 || (gemm && a.transA))
        return bad("supports A an activation (transA = 0) and B a 2-D weight");
      const bool tb = gemm && a.transB;
      const int64_t K = X.shape.empty() ? 0 : X.shape.back(), N = tb ? B.shape[0] : B.shape[1];
      if (K < 1 || (tb ? B.shape[1] : B.shape[0]) != K)
        return bad("A " + shape_str(X.shape) + " and B " + shape_str(B.shape) + " disagree on K");
      if (X.shape.size() < 2 || Y.shape.size() != X.shape.size())  // Gemm too: rows of any rank (GPT-2's Conv1D)
        return bad("A " + shape_str(X.shape) + " / Y " + shape_str(Y.shape) + " have the wrong rank");
      // The GEMM writes rows x N per sample: Y must hold exactly that.
      if (Y.shape.back() != N || Y.elements() != X.elements() / K * N)
        return bad("output " + shape_str(Y.shape) + " does not hold A " + shape_str(X.shape) + " x B " + shape_str(B.shape));
      if (gemm && op.inputs.size() > 2 && op.inputs[2] != kAbsentInput && a.beta != 0.f) {
        const TensorInfo& Ct = plan.tensors[op.inputs[2]];
        if (!Ct.is_weight()) return bad("C must be a weight");
        const int64_t n = Ct.elements();
        const bool row = n == N && (Ct.shape.size() <= 1 || (Ct.shape.size() == 2 && Ct.shape[0] == 1));
        if (!row && n != 1) return bad("C weight " + shape_str(Ct.shape) + " must broadcast as [N] or a scalar");
      }
      return Status::kOk;
    }
    case OpType::kRelu: case OpType::kLeakyRelu: case OpType::kSigmoid: case OpType::kTanh:
    case OpType::kErf: case OpType::kGelu:
    case OpType::kSoftmax: case OpType::kLogSoftmax:
      if (!need(1, 1)) return in_count(1, 1);
      if (X.is_weight()) return bad("input must be an activation");
      if (X.elements() != Y.elements()) return bad("input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ");
      if (op.type == OpType::kSoftmax || op.type == OpType::kLogSoftmax) {
        if (a.axis < 0 || size_t(a.axis) >= X.shape.size() || a.axis == X.batch_axis())
          return bad("axis out of range (or the batch's) for " + shape_str(X.shape));
        if (X.shape[a.axis] < 1) return bad("empty softmax axis");
      }
      return Status::kOk;
    case OpType::kMaxPool:
    case OpType::kAveragePool: {
      if (!need(1, 1)) return in_count(1, 1);
      if (X.is_weight() || X.shape.size() != 4 || Y.shape.size() != 4 || X.shape[1] != Y.shape[1])
        return bad("only 2-D pooling over an activation [n,C,H,W]; X " + shape_str(X.shape) + ", Y " + shape_str(Y.shape));
      const bool mx = op.type == OpType::kMaxPool;
      const int64_t dh = mx ? a.dilations[0] : 1, dw = mx ? a.dilations[1] : 1;  // AveragePool has none
      if (a.kernel[0] < 1 || a.kernel[1] < 1 || a.strides[0] < 1 || a.strides[1] < 1 || dh < 1 || dw < 1)
        return bad("kernel, strides and dilations must be >= 1");
      // ONNX output size, floor or ceil; with ceil the last window starts inside input + top/left pad.
      auto out = [&](int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
        const int64_t span = in + p0 + p1 - (d * (k - 1) + 1);
        int64_t o = (a.ceilMode ? (span + s - 1) / s : span / s) + 1;
        if (a.ceilMode && (o - 1) * s >= in + p0) --o;
        return o;
      };
      const int64_t eoh = out(X.shape[2], a.kernel[0], a.strides[0], a.pads[0], a.pads[2], dh);
      const int64_t eow = out(X.shape[3], a.kernel[1], a.strides[1], a.pads[1], a.pads[3], dw);
      if (eoh != Y.shape[2] || eow != Y.shape[3])
        return bad("output shape " + shape_str(Y.shape) + " differs from the computed [-1," + std::to_string(X.shape[1]) +
                   "," + std::to_string(eoh) + "," + std::to_string(eow) + "]");
      return Status::kOk;
    }
    case OpType::kGlobalAveragePool:
      if (!need(1, 1)) return in_count(1, 1);
      if (X.is_weight() || X.shape.size() < 3 || Y.elements() != X.shape[1])
        return bad("expects X [n,C,...] and Y [n,C,1,...]; X " + shape_str(X.shape) + ", Y " + shape_str(Y.shape));
      return Status::kOk;
    case OpType::kFlatten:
      if (!need(1, 2)) return in_count(1, 2);
      if (X.is_weight()) return bad("input must be an activation");
      if (X.elements() != Y.elements())
        return bad("input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ in elements per sample");
      return Status::kOk;
    case OpType::kLayerNorm: {
      if (!need(2, 3)) return in_count(2, 3);
      // The batch must lie before the normalised axes (outside a row).
      if (X.is_weight() || a.axis < 0 || size_t(a.axis) >= X.shape.size() || X.batch_axis() >= a.axis ||
          X.elements() != Y.elements())
        return bad("needs an activation, batch axis < axis < rank and an output of its size; X " + shape_str(X.shape));
      const int64_t n = prod(X.shape, size_t(a.axis));
      for (size_t i = 1; i < op.inputs.size(); ++i)
        if (op.inputs[i] != kAbsentInput && (!plan.tensors[op.inputs[i]].is_weight() || plan.tensors[op.inputs[i]].elements() != n))
          return bad("scale and bias must be weights of the normalised size " + std::to_string(n));
      return Status::kOk;
    }
    case OpType::kPow: case OpType::kSqrt: case OpType::kReciprocal: case OpType::kExp:
    case OpType::kNeg: case OpType::kLog: case OpType::kAbs: case OpType::kSin: case OpType::kCos:
    case OpType::kTan: case OpType::kAsin: case OpType::kAcos: case OpType::kAtan: case OpType::kSinh:
    case OpType::kCosh: case OpType::kAsinh: case OpType::kAcosh: case OpType::kAtanh:
    case OpType::kElu: case OpType::kSelu: case OpType::kCelu: case OpType::kSoftplus: case OpType::kSoftsign:
    case OpType::kMish: case OpType::kThresholdedRelu:
      if (!need(1, 1)) return in_count(1, 1);
      if (X.is_weight()) return bad("input must be an activation");
      if (X.elements() != Y.elements()) return bad("input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) + " differ");
      return Status::kOk;
    case OpType::kAttention: {
      if (!need(3, 4)) return in_count(3, 4);
      AttentionDesc d;
      std::string why;
      if (!attention_desc(plan, op, 1, &d, &why)) return bad(why);
      return Status::kOk;
    }
    case OpType::kReduceMean: case OpType::kReduceSum: case OpType::kReduceMax: {
      if (!need(1, 1)) return in_count(1, 1);
      if (X.is_weight() || X.shape.size() < 2 || X.shape.size() > size_t(kMaxRank))
        return bad("needs an activation of rank 2..6, found " + shape_str(X.shape));
      int64_t out = 1;
      std::vector<bool> red(X.shape.size(), false);
      for (int ax : a.axes) {
        if (ax < 1 || size_t(ax) >= X.shape.size()) return bad("axis " + std::to_string(ax) + " out of range");
        red[size_t(ax)] = true;
      }
      for (size_t i = 1; i < X.shape.size(); ++i)
        if (!red[i]) out *= X.shape[i];
      if (Y.elements() != out) return bad("output " + shape_str(Y.shape) + " does not hold " + shape_str(X.shape) + " reduced");
      return Status::kOk;
    }
    default:  // forward_data.cc's ops, dispatched before this switch
      break;
    case OpType::kClip: case OpType::kHardSigmoid: case OpType::kHardSwish: case OpType::kSiLU:
    case OpType::kPad: case OpType::kSplit: case OpType::kLSTM:
      return check_cnn_op(plan, op, message);
  }
  return bad("not implemented");
}

// The CNN ops and LSTM: the checks of cpu/clip_hard.cc, pad.cc, split.cc and lstm.cc.
Status check_cnn_op(const Plan& plan, const Op& op, std::string* message) {
  const auto bad = [&](const std::string& why) { return unsupported(op, why, message); };
  const OpAttrs& a = op.attrs;
  const TensorInfo& X = plan.tensors[op.inputs[0]];
  if (X.is_weight()) return bad("input must be an activation");
  const size_t r = X.shape.size();
  switch (op.type) {
    case OpType::kPad: {
      const TensorInfo& Y = plan.tensors[op.outputs[0]];
      if (op.inputs.size() != 1 || r < 1 || r > size_t(kMaxRank) || Y.shape.size() != r || a.padsNd.size() != 2 * r)
        return bad("pads must list begins and ends for each of the dimensions of " + shape_str(X.shape) + " (rank <= 6)");
      if (a.padsNd[0] != 0 || a.padsNd[r] != 0) return bad("padding the batch dimension is not supported");
      for (size_t i = 1; i < r; ++i) {
        if (X.shape[i] + a.padsNd[i] + a.padsNd[r + i] != Y.shape[i] || Y.shape[i] < 0)
          return bad("output " + shape_str(Y.shape) + " is not " + shape_str(X.shape) + " padded");
        if (X.shape[i] == 0 && a.padMode != PadMode::kConstant && Y.shape[i] > 0) return bad("reflect/edge padding of an empty dimension");
      }
      return Status::kOk;
    }
    case OpType::kSplit: {
      if (op.inputs.size() != 1) return bad("expects one input");
      if (a.axis < 1 || size_t(a.axis) >= r) return bad("axis out of range for " + shape_str(X.shape));
      if (a.split.size() != op.outputs.size()) return bad("split sizes and outputs differ in number");
      int64_t total = 0;
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        const TensorInfo& Y = plan.tensors[op.outputs[j]];
        bool fits = Y.shape.size() == r && a.split[j] >= 0 && Y.shape[a.axis] == a.split[j];
        for (size_t i = 1; fits && i < r; ++i) fits = int(i) == a.axis || Y.shape[i] == X.shape[i];
        if (!fits) return bad("output " + shape_str(Y.shape) + " is not part of " + shape_str(X.shape));
        total += a.split[j];
      }
      if (total != X.shape[a.axis]) return bad("split sizes do not add up to " + std::to_string(X.shape[a.axis]));
      return Status::kOk;
    }
    case OpType::kLSTM: {
      if (a.layout != 1) return bad("layout 0 (the batch on axis 1) needs the batch-at-any-axis plan; plan v1 LSTMs are batch-first");
      const int64_t D = a.direction == LstmDirection::kBidirectional ? 2 : 1, H = a.hiddenSize;
      if (r != 3 || op.inputs.size() < 3 || op.inputs.size() > 4 || op.outputs.size() > 3)
        return bad("expects X [N, S, I], W, R, optional B and up to 3 outputs");
      const int64_t S = X.shape[1], I = X.shape[2];
      const std::vector<int64_t> w{D, 4 * H, I}, rr{D, 4 * H, H}, b{D, 8 * H};
      if (op.inputs[1] < 0 || !plan.tensors[op.inputs[1]].is_weight() || plan.tensors[op.inputs[1]].shape != w)
        return bad("W must be a weight " + shape_str(w));
      if (op.inputs[2] < 0 || !plan.tensors[op.inputs[2]].is_weight() || plan.tensors[op.inputs[2]].shape != rr)
        return bad("R must be a weight " + shape_str(rr));
      if (op.inputs.size() > 3 && op.inputs[3] != kAbsentInput &&
          (!plan.tensors[op.inputs[3]].is_weight() || plan.tensors[op.inputs[3]].shape != b))
        return bad("B must be a weight " + shape_str(b));
      const std::vector<int64_t> want[3] = {{-1, S, D, H}, {-1, D, H}, {-1, D, H}};
      for (size_t i = 0; i < op.outputs.size(); ++i)
        if (plan.tensors[op.outputs[i]].shape != want[i]) return bad("output " + std::to_string(i) + " must be " + shape_str(want[i]));
      return Status::kOk;
    }
    default: {  // Clip, HardSigmoid, HardSwish, SiLU
      if (op.inputs.size() != 1) return bad("expects one input");
      if (X.elements() != plan.tensors[op.outputs[0]].elements()) return bad("input and output differ in size");
      if (op.type == OpType::kClip && !(a.clipMin <= a.clipMax)) return bad("min > max");
      return Status::kOk;
    }
  }
}

// dry: check and compute descriptors only.
Status run_op(const ForwardEnv& env, const Op& op, int64_t batch, cudaStream_t s, bool dry,
              std::string* message) {
  const Plan& plan = *env.plan;
  const Prec p = env.prec;
  auto ptr = [&](int32_t id) -> void* { return dry ? nullptr : tensor_ptr(env, id, batch); };
  auto in = [&](size_t i) { return op.inputs.size() > i ? op.inputs[i] : kAbsentInput; };
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] >= static_cast<int32_t>(plan.tensors.size())) return unsupported(op, "input id out of range", message);
  if (is_data_op(op.type)) {  // forward_data.cc (Range / ConstantOfShape have no inputs)
    if (op.outputs.size() != 1) return unsupported(op, "expects one output", message);
    return run_data_op(env, op, batch, s, dry, message);
  }
  const bool multi_out = op.type == OpType::kSplit || op.type == OpType::kLSTM;
  if (op.inputs.empty() || op.outputs.empty() || (op.outputs.size() != 1 && !multi_out))
    return unsupported(op, "expects inputs and one output", message);
  if (op.inputs[0] < 0) return unsupported(op, "input 0 is absent", message);
  if (dry) MEMLANE_TRY(check_op(plan, op, message));
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
    case OpType::kConvTranspose: {
      if (dry) return Status::kOk;
      CUDA_CHECK(conv_transpose2d(p, ptr(in(0)), ptr(in(1)), in(2) == kAbsentInput ? nullptr : ptr(in(2)),
                                  ptr(op.outputs[0]), conv_desc(plan, op, batch), s));
      return Status::kOk;
    }
    case OpType::kMatMul:
      if (x_weight || !is_weight(plan, in(1)) || plan.tensors[in(1)].shape.size() != 2) {
        BatchedMatMulDesc d;
        std::string why;
        if (!batched_desc(plan, op, batch, &d, &why)) return unsupported(op, why, message);
        if (dry) return Status::kOk;
        cudaError_t e = matmul_batched(*env.blas, env.blasHandle, p, ptr(in(0)), ptr(in(1)), ptr(op.outputs[0]), d, s,
                                       &blas_status);
        if (e != cudaSuccess) return blas_fail(e, "matmul_batched");
        return Status::kOk;
      }
      [[fallthrough]];
    case OpType::kGemm: {
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
        if (in(2) != kAbsentInput && d.beta != 0.f) {  // beta 0: C is ignored (cpu gemm.cc)
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
    case OpType::kFlatten: {
      if (dry) return Status::kOk;
      void* x = ptr(in(0));
      void* y = ptr(op.outputs[0]);
      if (x != y)
        CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(n_out) * prec_bytes(p), cudaMemcpyDeviceToDevice, s));
      return Status::kOk;
    }
    case OpType::kSoftmax: case OpType::kLogSoftmax: {
      const auto xd = dims_of(xt, batch);
      const size_t axis = static_cast<size_t>(op.attrs.axis);  // not the batch's (check_op)
      if (axis >= xd.size()) return unsupported(op, "axis out of range", message);
      if (dry) return Status::kOk;
      CUDA_CHECK(softmax(p, ptr(in(0)), ptr(op.outputs[0]), prod(xd, 0, axis), xd[axis], prod(xd, axis + 1),
                         op.type == OpType::kLogSoftmax, s));
      return Status::kOk;
    }
    case OpType::kLayerNorm: {
      const size_t axis = static_cast<size_t>(op.attrs.axis);
      const auto xd = dims_of(xt, batch);
      if (axis >= xd.size()) return unsupported(op, "axis out of range", message);
      if (dry) return Status::kOk;
      const int64_t n = prod(xd, axis);
      CUDA_CHECK(layernorm(p, ptr(in(0)), ptr(op.outputs[0]), ptr(in(1)), in(2) == kAbsentInput ? nullptr : ptr(in(2)),
                           prod(xd) / n, n, op.attrs.epsilon, s));
      return Status::kOk;
    }
    case OpType::kPow: case OpType::kSqrt: case OpType::kReciprocal: case OpType::kExp:
    case OpType::kNeg: case OpType::kLog: case OpType::kAbs: case OpType::kSin: case OpType::kCos:
    case OpType::kTan: case OpType::kAsin: case OpType::kAcos: case OpType::kAtan: case OpType::kSinh:
    case OpType::kCosh: case OpType::kAsinh: case OpType::kAcosh: case OpType::kAtanh:
    case OpType::kElu: case OpType::kSelu: case OpType::kCelu: case OpType::kSoftplus: case OpType::kSoftsign:
    case OpType::kMish: case OpType::kThresholdedRelu: {
      if (dry) return Status::kOk;
      const MathArgs m{op.type == OpType::kPow ? op.attrs.exponent : op.attrs.alpha, op.attrs.gamma};
      CUDA_CHECK(math(math_kind(op.type), m, p, ptr(in(0)), ptr(op.outputs[0]), n_out, s));
      return Status::kOk;
    }
    case OpType::kReduceMean: case OpType::kReduceSum: case OpType::kReduceMax: {
      const auto xd = dims_of(xt, batch);
      if (xd.size() > static_cast<size_t>(kMaxRank)) return unsupported(op, "rank above 6", message);
      ReduceDesc d;
      d.rank = static_cast<int>(xd.size());
      for (size_t i = 0; i < xd.size(); ++i) d.dims[i] = xd[i];
      for (int ax : op.attrs.axes) {
        if (ax < 1 || ax >= d.rank) return unsupported(op, "axis out of range", message);
        d.reduced[ax] = true;
      }
      if (dry) return Status::kOk;
      const ReduceOp k = op.type == OpType::kReduceMax ? ReduceOp::kMax
                         : op.type == OpType::kReduceSum ? ReduceOp::kSum : ReduceOp::kMean;
      CUDA_CHECK(reduce(k, p, ptr(in(0)), ptr(op.outputs[0]), d, s));
      return Status::kOk;
    }
    case OpType::kAttention: {
      AttentionDesc d;
      std::string why;
      if (!attention_desc(plan, op, batch, &d, &why)) return unsupported(op, why, message);
      if (dry) return Status::kOk;
      const bool masked = op.inputs.size() == 4 && op.inputs[3] != kAbsentInput;
      CUDA_CHECK(attention(p, ptr(in(0)), ptr(in(1)), ptr(in(2)), masked ? ptr(in(3)) : nullptr, ptr(op.outputs[0]), d, s));
      return Status::kOk;
    }
    case OpType::kClip: case OpType::kHardSigmoid: case OpType::kHardSwish: case OpType::kSiLU: {
      if (dry) return Status::kOk;
      const ClipHardKind k = op.type == OpType::kClip ? ClipHardKind::kClip
                             : op.type == OpType::kHardSigmoid ? ClipHardKind::kHardSigmoid
                             : op.type == OpType::kHardSwish ? ClipHardKind::kHardSwish : ClipHardKind::kSiLU;
      const bool clip = op.type == OpType::kClip;
      CUDA_CHECK(clip_hard(k, clip ? op.attrs.clipMin : op.attrs.alpha, clip ? op.attrs.clipMax : op.attrs.beta, p, ptr(in(0)),
                           ptr(op.outputs[0]), n_out, s));
      return Status::kOk;
    }
    case OpType::kPad: {
      if (dry) return Status::kOk;
      const auto xd = dims_of(xt, batch);
      CUDA_CHECK(pad(p, ptr(in(0)), ptr(op.outputs[0]), static_cast<int>(xd.size()), xd.data(), op.attrs.padsNd.data(),
                     static_cast<int>(op.attrs.padMode), op.attrs.padValue, s));
      return Status::kOk;
    }
    case OpType::kSplit: {
      if (dry) return Status::kOk;
      const auto xd = dims_of(xt, batch);
      const size_t axis = static_cast<size_t>(op.attrs.axis);
      const int64_t outer = prod(xd, 0, axis), inner = prod(xd, axis + 1);
      int64_t at = 0;
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        CUDA_CHECK(split_part(p, ptr(in(0)), ptr(op.outputs[j]), outer, xd[axis], op.attrs.split[j], at, inner, s));
        at += op.attrs.split[j];
      }
      return Status::kOk;
    }
    case OpType::kLSTM: {
      LstmDesc d;
      d.S = xt.shape[1]; d.I = xt.shape[2]; d.H = op.attrs.hiddenSize;
      d.D = op.attrs.direction == LstmDirection::kBidirectional ? 2 : 1;
      d.reverse = op.attrs.direction == LstmDirection::kReverse;
      const int64_t need = lstm_work_elems_per_sample(d.S, d.H);
      if (dry) return Status::kOk;
      // Samples are independent: run the batch in chunks that fit the scratch buffer.
      const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(batch, env.colElems / need));
      if (env.colElems < need) return unsupported(op, "scratch buffer smaller than one sample's LSTM state", message);
      const int64_t es = prec_bytes(p), ys = d.S * d.D * d.H * es, hs = d.D * d.H * es;
      auto at = [&](size_t i, int64_t n0, int64_t per) -> void* {
        return op.outputs.size() > i ? static_cast<char*>(ptr(op.outputs[i])) + n0 * per : nullptr;
      };
      for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
        d.B = std::min(chunk, batch - n0);
        cudaError_t e = lstm(*env.blas, env.blasHandle, p, static_cast<char*>(ptr(in(0))) + n0 * d.S * d.I * es, ptr(in(1)),
                             ptr(in(2)), in(3) == kAbsentInput ? nullptr : ptr(in(3)), at(0, n0, ys), at(1, n0, hs),
                             at(2, n0, hs), env.col, d, s, &blas_status);
        if (e != cudaSuccess) return blas_fail(e, "lstm");
      }
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
  const uint64_t offset = static_cast<uint64_t>(batch) * t.offset;
  return env.arena + (env.halfArena ? offset / 2 : offset);
}

bool arena_halves(const Plan& plan, Prec p) {
  if (p != Prec::kF16) return false;
  for (const TensorInfo& t : plan.tensors)
    if (!t.is_weight() && t.dtype != DType::kFloat32) return false;
  return true;
}

int64_t max_col_elems_per_sample(const Plan& plan) {
  int64_t m = 0;
  for (const Op& op : plan.ops) {
    if (op.type == OpType::kConv && op.inputs.size() >= 2 && plan.tensors[op.inputs[0]].shape.size() == 4)
      m = std::max(m, conv_col_elems_per_sample(conv_desc(plan, op, 1)));
    if (op.type == OpType::kLSTM && plan.tensors[op.inputs[0]].shape.size() == 3)  // the LSTM's state shares it
      m = std::max(m, lstm_work_elems_per_sample(plan.tensors[op.inputs[0]].shape[1], op.attrs.hiddenSize));
  }
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
