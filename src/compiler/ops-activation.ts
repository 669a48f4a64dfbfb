/**
 * The remaining ONNX float activations and trigonometry, each a plan op of its own name run by
 * memlane-rt's elementwise math kernels (cpu/elementwise_math.cc, cuda/ops/math.cu), and PRelu,
 * a slope broadcast onto x (cpu/binary.cc, cuda/ops/data_binary.cu). The scalar formulas here
 * are the compiler's fold of a constant input (PRelu's folds as a binary op, fold-math.ts; the
 * native kernels have their own formulas; the tests hold both to ONNX Runtime).
 */
import { attrFloat } from "./attrs.ts";
import type { Node } from "./ir.ts";
import { fmtShape } from "./ir.ts";
import { type Lowering, floatAct, shapeError } from "./op-ctx.ts";
import { Binary } from "./ops-data.ts";

/** ONNX's attribute defaults (Selu's are the float32 values of its constants). */
const ALPHA_DEFAULT: Readonly<Record<string, number>> = { Elu: 1, Celu: 1, ThresholdedRelu: 1, Selu: 1.67326319217681884765625 };
const SELU_GAMMA_DEFAULT = 1.05070102214813232421875;

const softplus = (x: number) => Math.max(x, 0) + Math.log1p(Math.exp(-Math.abs(x)));
const elu = (x: number, alpha: number) => (x > 0 ? x : alpha * Math.expm1(x));

/** Activations without attributes: y = f(x). */
const PLAIN: Readonly<Record<string, (x: number) => number>> = {
  Tan: Math.tan, Asin: Math.asin, Acos: Math.acos, Atan: Math.atan,
  Sinh: Math.sinh, Cosh: Math.cosh, Asinh: Math.asinh, Acosh: Math.acosh, Atanh: Math.atanh,
  Softplus: softplus,
  Softsign: (x) => x / (1 + Math.abs(x)),
  Mish: (x) => x * Math.tanh(softplus(x)),
};

/** The plan attributes of a parameterised activation, ONNX's defaults filled in. */
function activationAttrs(n: Node): Record<string, number> {
  const alpha = ALPHA_DEFAULT[n.opType];
  if (alpha === undefined) return {};
  const attrs: Record<string, number> = { alpha: attrFloat(n, "alpha", alpha) };
  if (n.opType === "Selu") attrs["gamma"] = attrFloat(n, "gamma", SELU_GAMMA_DEFAULT);
  return attrs;
}

/** y = f(x) of one of this module's unary ops (with the node's attributes), else undefined. */
export function activationFn(n: Node): ((x: number) => number) | undefined {
  const plain = PLAIN[n.opType];
  if (plain) return plain;
  const a = activationAttrs(n);
  switch (n.opType) {
    case "Elu": return (x) => elu(x, a["alpha"]!);
    case "Selu": return (x) => a["gamma"]! * elu(x, a["alpha"]!);
    case "Celu": return (x) => a["alpha"]! * elu(x / a["alpha"]!, 1);
    case "ThresholdedRelu": return (x) => (x > a["alpha"]! ? x : 0);
    default: return undefined;
  }
}

/** Element-wise on float activations of any layout, like Relu. */
const Activation: Lowering = (c) => ({ shapes: [floatAct(c, 0)], attrs: activationAttrs(c.node) });

/**
 * PRelu(x, slope): the slope broadcasts onto x (ONNX's unidirectional broadcast), so the result
 * has x's shape; per channel ([C, 1, 1] against NCHW) in the nets that use it.
 */
const PRelu: Lowering = (c) => {
  const x = floatAct(c, 0);
  if (c.dtype(1) !== undefined && c.dtype(1) !== "float32") throw shapeError(c, `slope is ${c.dtype(1)}, PRelu takes float32`);
  const out = Binary(c);
  if (fmtShape(out.shapes[0]!) !== fmtShape(x)) throw shapeError(c, `slope does not broadcast onto x ${fmtShape(x)} (the result would be ${fmtShape(out.shapes[0]!)})`);
  return out;
};

export const ACTIVATION_LOWERINGS: Readonly<Record<string, Lowering>> = {
  ...Object.fromEntries([...Object.keys(PLAIN), ...Object.keys(ALPHA_DEFAULT)].map((op) => [op, Activation])),
  PRelu,
};
