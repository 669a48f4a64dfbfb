#include "cpu/conv_pw_dw.h"

#include "cpu/conv_depthwise_blocked.h"
#include "cpu/plan_queries.h"

namespace memlane::cpu {
namespace {

// The activation of the conv at ops[i]: its own Relu, or the next op's when that op reads the
// conv's output alone (which nothing else reads). *out: the tensor holding the result; *next:
// the op after the pair.
bool conv_with_act(const Plan& plan, size_t i, ConvAct* act, int32_t* out, size_t* next) {
  const Op& conv = plan.ops[i];
  if (conv.outputs.size() != 1) return false;
  *out = conv.outputs[0];
  *next = i + 1;
  *act = {};
  if (conv.attrs.activation == Activation::kRelu) {
    act->kind = ConvAct::kRelu;
    return true;
  }
  if (conv.attrs.activation != Activation::kNone) return false;
  if (i + 1 < plan.ops.size()) {
    const Op& a = plan.ops[i + 1];
    if (a.inputs.size() == 1 && a.inputs[0] == *out && a.outputs.size() == 1 && !read_elsewhere(plan, *out, i + 1) &&
        conv_act_of(a, act)) {
      const TensorInfo &T = plan.tensors[size_t(*out)], &O = plan.tensors[size_t(a.outputs[0])];
      if (O.shape != T.shape || O.dtype != T.dtype) return false;
      *out = a.outputs[0];
      *next = i + 2;
    }
  }
  return true;
}

bool is_conv_1x1(const Plan& plan, const Op& op) {
  if (op.type != OpType::kConv || op.inputs.size() < 2) return false;
  const OpAttrs& a = op.attrs;
  const TensorInfo& W = plan.tensors[size_t(op.inputs[1])];
  return W.is_weight() && W.shape.size() == 4 && W.shape[2] == 1 && W.shape[3] == 1 && a.kernel[0] == 1 &&
         a.kernel[1] == 1 && a.strides[0] == 1 && a.strides[1] == 1 && a.group == 1 && a.pads[0] == 0 &&
         a.pads[1] == 0 && a.pads[2] == 0 && a.pads[3] == 0;
}

}  // namespace

bool pointwise_depthwise_chain(const Plan& plan, size_t i, PointwiseDepthwise* c) {
  const auto& ops = plan.ops;
  if (!is_conv_1x1(plan, ops[i])) return false;
  int32_t t = -1;
  size_t j = 0;
  if (!conv_with_act(plan, i, &c->pw_act, &t, &j) || j >= ops.size()) return false;
  const Op& dw = ops[j];
  if (dw.type != OpType::kConv || dw.inputs.size() < 2 || dw.inputs[0] != t || read_elsewhere(plan, t, j)) return false;
  const TensorInfo &X = plan.tensors[size_t(ops[i].inputs[0])], &T = plan.tensors[size_t(t)];
  const TensorInfo& Wd = plan.tensors[size_t(dw.inputs[1])];
  if (X.is_weight() || T.is_weight() || T.shape.size() != 4 || !Wd.is_weight() || Wd.shape.size() != 4) return false;
  const int64_t C = T.shape[1];
  if (dw.attrs.group != C || Wd.shape[0] != C || Wd.shape[1] != 1 || C < 2) return false;
  int32_t out = -1;
  size_t after = 0;
  if (!conv_with_act(plan, j, &c->dw_act, &out, &after)) return false;
  const TensorInfo& O = plan.tensors[size_t(out)];
  if (O.is_weight() || overlaps(O, X)) return false;
  c->dw = j;
  c->output = out;
  c->skip = after - i - 1;
  return true;
}

std::unique_ptr<Kernel> make_pointwise_depthwise(const BuildCtx& bc, size_t i, const PointwiseDepthwise& c) {
  const Plan& plan = *bc.plan;
  const Op &pw = plan.ops[i], &dw = plan.ops[c.dw];
  const TensorInfo &X = bc.info(pw.inputs[0]), &Wp = bc.info(pw.inputs[1]), &T = bc.info(dw.inputs[0]);
  const TensorInfo &Wd = bc.info(dw.inputs[1]), &Y = bc.info(c.output);
  if (X.shape.size() != 4 || Y.shape.size() != 4 || X.dtype != DType::kFloat32 || T.dtype != DType::kFloat32 ||
      Y.dtype != DType::kFloat32 || !X.batch_first() || !T.batch_first() || !Y.batch_first())
    return nullptr;
  const int64_t C = T.shape[1];
  if (Wp.shape[0] != C || Wp.shape[1] != X.shape[1] || X.shape[2] != T.shape[2] || X.shape[3] != T.shape[3] ||
      Y.shape[1] != C)
    return nullptr;
  const OpAttrs& a = dw.attrs;
  const DwGeom g{T.shape[2], T.shape[3], Y.shape[2], Y.shape[3], a.kernel[0], a.kernel[1], a.strides[0], a.strides[1],
                 a.pads[0], a.pads[1], a.dilations[0], a.dilations[1]};
  // The shapes make_conv would check (it refuses the depthwise conv by name where they differ).
  if (Wd.shape[2] != g.kh || Wd.shape[3] != g.kw || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || a.pads[0] < 0 ||
      a.pads[1] < 0 || a.pads[2] < 0 || a.pads[3] < 0 ||
      g.OH != (g.H + a.pads[0] + a.pads[2] - (g.dh * (g.kh - 1) + 1)) / g.sh + 1 ||
      g.OW != (g.W + a.pads[1] + a.pads[3] - (g.dw * (g.kw - 1) + 1)) / g.sw + 1)
    return nullptr;
  if (!pointwise_depthwise_pays(g, C)) return nullptr;
  const auto bias = [&](const Op& op) -> const float* {
    if (op.inputs.size() < 3 || op.inputs[2] == kAbsentInput) return nullptr;
    return bc.info(op.inputs[2]).data;
  };
  for (const Op* op : {&pw, &dw})
    if (op->inputs.size() > 2 && op->inputs[2] != kAbsentInput &&
        (!bc.info(op->inputs[2]).is_weight() || bc.info(op->inputs[2]).elements() != C))
      return nullptr;
  DwPointwiseInput in;
  in.C = X.shape[1];
  in.x = bc.ref(pw.inputs[0]);
  in.w = Wp.data;
  in.b = bias(pw);
  in.act = c.pw_act;
  return make_depthwise_blocked_kernel(g, C, bc.ref(dw.inputs[0]), bc.ref(c.output), Wd.data, bias(dw), c.dw_act,
                                       bc.threads, &in);
}

}  // namespace memlane::cpu
