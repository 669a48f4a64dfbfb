/**
 * Lowerings of the float ops transformer exports compute on activations: LayerNormalization,
 * MatMul with two activations (or an N-D weight), Pow with a constant exponent, elementwise
 * math, and ReduceMean/ReduceSum/ReduceMax over any non-batch axes.
 */
import { attrFloat, attrInt, attrInts, normAxis } from "./attrs.ts";
import { broadcastDims, mk } from "./fold-math.ts";
import { type ConstTensor, BATCH, batchAxis, fmtShape, numel } from "./ir.ts";
import { type Lowered, type Lowering, type OpCtx, addInts, floatAct, requireWeight, shapeError } from "./op-ctx.ts";
import * as conv from "./ops-conv.ts";
import * as tensor from "./ops-tensor.ts";

/**
 * `t` broadcast (numpy rules) to exactly `dims`, dropping leading 1s beyond their rank, or
 * undefined when it does not broadcast to them; `t` itself when it already has their size.
 */
export function expandTo(t: ConstTensor, dims: number[]): ConstTensor | undefined {
  const td = [...t.dims];
  while (td.length > dims.length && td[0] === 1) td.shift();
  if (td.length > dims.length) return undefined;
  const wd = [...new Array<number>(dims.length - td.length).fill(1), ...td];
  if (wd.some((d, i) => d !== 1 && d !== dims[i])) return undefined;
  const total = numel(dims);
  if (numel(wd) === total) return { ...t, dims: [...dims] };
  const full = new Float32Array(total);
  for (let k = 0; k < total; k++) {
    let rem = k, src = 0, stride = 1;
    for (let d = dims.length - 1; d >= 0; d--) {
      const q = rem % dims[d]!;
      rem = Math.floor(rem / dims[d]!);
      if (wd[d] !== 1) src += q * stride;
      stride *= wd[d]!;
    }
    full[k] = t.data[src]!;
  }
  return mk(true, dims, full);
}

/** A per-element weight over the normalised dims, as a weight of exactly those dims. */
function normWeight(c: OpCtx, i: number, what: string, norm: number[]): string {
  const w = requireWeight(c, i, what);
  const full = expandTo(w, norm);
  if (!full) throw shapeError(c, `${what} [${w.dims}] does not broadcast to the normalised dims [${norm}]`);
  return c.addConst(`${c.node.inputs[i]}.ln`, full);
}

export const LayerNormalization: Lowering = (c) => {
  const x = floatAct(c, 0);
  const axis = normAxis(c.node, attrInt(c.node, "axis", -1), x.length);
  // Rows of the normalised trailing axes: the batch may sit on any axis before them.
  if (batchAxis(x) >= axis) throw shapeError(c, `axis ${attrInt(c.node, "axis", -1)} of ${fmtShape(x)} would normalise across the batch`);
  if (c.node.outputs.slice(1).some((o) => o)) throw shapeError(c, "the Mean and InvStdDev outputs (training) are not supported");
  const norm = x.slice(axis);
  const scale = normWeight(c, 1, "scale", norm);
  const bias = c.node.inputs[2] ? normWeight(c, 2, "bias", norm) : "";
  return {
    shapes: [x],
    inputs: [c.node.inputs[0]!, scale, bias],
    attrs: { axis, epsilon: attrFloat(c.node, "epsilon", 1e-5) },
  };
};

interface Operand {
  dims: number[];
  w?: ConstTensor;
}

/**
 * MatMul: a 2-D weight B keeps the one-GEMM fast path (ops-tensor.ts); otherwise a batched
 * product over the broadcast leading dims, where either operand may be an activation
 * (the batch on any leading dim, the same one in both) and a weight may have fewer dims
 * (numpy broadcasting).
 */
export const MatMul: Lowering = (c) => {
  const wb = c.weight(1);
  if (!c.weight(0) && wb && wb.dims.length === 2) return tensor.MatMul(c);
  const [a, b] = [0, 1].map((i): Operand => {
    const w = c.weight(i);
    return w ? { dims: w.dims, w } : { dims: floatAct(c, i) };
  }) as [Operand, Operand];
  if (a.w && b.w) throw shapeError(c, "both operands are constants");
  if (a.dims.length < 2 || b.dims.length < 2) {
    throw shapeError(c, `1-D operands (${fmtShape(a.dims)} x ${fmtShape(b.dims)}) are not supported; memlane-rt multiplies matrices`);
  }
  const rank = Math.max(a.dims.length, b.dims.length);
  for (const s of [a, b]) {
    if (!s.w && s.dims.length !== rank) {
      throw shapeError(c, `operands ${fmtShape(a.dims)} and ${fmtShape(b.dims)} differ in rank, which would align the batch with another dimension`);
    }
    if (s.w && s.dims.length === rank && s.dims[0] !== 1) {
      throw shapeError(c, `weight [${s.dims}] would broadcast over the batch; a weight may have at most rank ${rank} with a leading 1`);
    }
  }
  const [m, k] = a.dims.slice(-2) as [number, number];
  const [k2, n] = b.dims.slice(-2) as [number, number];
  if (k !== k2) throw shapeError(c, `A ${fmtShape(a.dims)} and B ${fmtShape(b.dims)} disagree on K (${k} vs ${k2})`);
  const lead = broadcastDims(a.dims.slice(0, -2), b.dims.slice(0, -2));
  // The batch (-k, on any leading dim) is where every activation operand has it; a weight has 1 there.
  const bax = lead ? lead.findIndex((d) => d < 0) : -1;
  const sameBatch = (s: Operand) => s.w !== undefined || (s.dims[bax] === lead![bax] && s.dims.findIndex((d) => d < 0) === bax);
  if (!lead || bax < 0 || lead.filter((d) => d < 0).length !== 1 || !sameBatch(a) || !sameBatch(b)) {
    throw shapeError(c, `the leading dims of A ${fmtShape(a.dims)} and B ${fmtShape(b.dims)} do not broadcast with the batch on one leading dim`);
  }
  return { shapes: [[...lead, m, n]], attrs: {} };
};

/** Pow with a constant scalar exponent (x^2 in LayerNorm, x^3 in the tanh Gelu). */
export const Pow: Lowering = (c) => {
  const x = floatAct(c, 0);
  const e = c.weight(1);
  if (!e || numel(e.dims) !== 1) throw shapeError(c, `the exponent "${c.node.inputs[1]}" must be a constant scalar`);
  const out = broadcastDims(x, e.dims);
  if (!out || out.length !== x.length) throw shapeError(c, `exponent [${e.dims}] has a higher rank than the base ${fmtShape(x)}`);
  return { shapes: [x], inputs: [c.node.inputs[0]!], attrs: { exponent: e.data[0]! } };
};

/** The constant axes of a Reduce* node (attribute or, from opset 13/18, input 1), normalised. */
function reduceAxes(c: OpCtx, rank: number): number[] | undefined {
  const inputFrom = c.node.opType === "ReduceSum" ? 13 : 18;
  let raw: number[] | undefined;
  if (c.opset >= inputFrom && c.node.inputs[1]) {
    const t = c.weight(1);
    if (!t) throw shapeError(c, "the axes are computed at run time; only constant axes are supported");
    raw = Array.from(t.data);
  } else {
    raw = attrInts(c.node, "axes");
  }
  if (!raw || raw.length === 0) return attrInt(c.node, "noop_with_empty_axes", 0) ? [] : undefined;
  const axes = [...new Set(raw.map((a) => normAxis(c.node, a, rank)))].sort((p, q) => p - q);
  return axes;
}

function reduce(kind: "ReduceMean" | "ReduceSum" | "ReduceMax"): Lowering {
  return (c) => {
    const x = c.act(0);
    const axes = reduceAxes(c, x.length);
    if (!axes) throw shapeError(c, `reducing over all axes of ${fmtShape(x)} would reduce across the batch`);
    if (axes.includes(0)) throw shapeError(c, `axes [${axes}] include the batch dimension of ${fmtShape(x)}`);
    const spatial = x.slice(2).map((_, i) => i + 2);
    // CNN heads (x.mean((2, 3)) on [N, C, H, W]) keep their GlobalAveragePool rewrite.
    if (kind === "ReduceMean" && x.length >= 4 && axes.length === spatial.length && axes.every((a, i) => a === spatial[i])) {
      return conv.ReduceMean(c);
    }
    const keepdims = attrInt(c.node, "keepdims", 1);
    if (axes.length === 0) return { op: "Reshape", inputs: [c.node.inputs[0]!], shapes: [x], attrs: { shape: x } };
    const out = keepdims ? x.map((d, i) => (axes.includes(i) ? 1 : d)) : x.filter((_, i) => !axes.includes(i));
    return { shapes: [out], inputs: [c.node.inputs[0]!], attrs: { axes, keepdims } };
  };
}

export const ReduceMean = reduce("ReduceMean");
export const ReduceSum = reduce("ReduceSum");
export const ReduceMax = reduce("ReduceMax");

/**
 * ReduceL2 (ConvNeXt-V2's global response normalisation), ReduceSumSquare and ReduceL1 as a
 * ReduceSum over the same axes of x² or |x| (a Pow or Abs before it), ReduceL2 then a Sqrt.
 */
function reduceOfPower(kind: "ReduceL2" | "ReduceSumSquare" | "ReduceL1"): Lowering {
  const sum = reduce("ReduceSum");
  return (c) => {
    const x = c.act(0);
    if (reduceAxes(c, x.length)?.length === 0) throw shapeError(c, "noop_with_empty_axes with no axes is not supported");
    const low = sum(c);
    const before: Lowered["before"] = kind === "ReduceL1" ? { op: "Abs", attrs: {}, shape: x } : { op: "Pow", attrs: { exponent: 2 }, shape: x };
    return { ...low, op: "ReduceSum", before, ...(kind === "ReduceL2" ? { then: { op: "Sqrt", attrs: {}, shape: low.shapes[0]! } } : {}) };
  };
}

export const ReduceL2 = reduceOfPower("ReduceL2");
export const ReduceSumSquare = reduceOfPower("ReduceSumSquare");
export const ReduceL1 = reduceOfPower("ReduceL1");

/**
 * A reduction of a tensor whose first axis is k·batch (k > 1: windows or heads merged into the
 * batch, Swin-V2's cosine attention on [64·batch, heads, 49, 24]) as ONNX nodes: a Reshape
 * to [batch, k, ...], the reduction over the same axes one further on, and a Reshape back to
 * [k·batch, ...]; the reduce kernels take the batch first. Other tensors go to `lower` as they are.
 */
function batchSplit(lower: Lowering): Lowering {
  return (c) => {
    const x = c.actAny(0);
    if (batchAxis(x) !== 0 || x[0] === BATCH || c.dtype(0) !== "float32") return lower(c);
    const axes = reduceAxes(c, x.length);
    if (!axes || axes.length === 0 || axes.includes(0)) return lower(c);  // its own error
    const n = c.node, k = -x[0]!;
    const ints = (base: string, v: number[]) => addInts(c, `${n.name}.${base}`, v);
    const shifted = axes.map((a) => a + 1);
    const axesFromInput = c.opset >= (n.opType === "ReduceSum" ? 13 : 18) && !!n.inputs[1];
    const attrs = new Map(n.attrs);
    if (!axesFromInput) attrs.set("axes", shifted);
    const split = c.freshName(`${n.outputs[0]}.batch_split`), reduced = c.freshName(`${n.outputs[0]}.reduced`);
    const keepdims = attrInt(n, "keepdims", 1) === 1;
    const out = keepdims ? x.map((d, i) => (axes.includes(i) ? 1 : d)) : x.filter((_, i) => !axes.includes(i));
    return {
      shapes: [], attrs: {},
      expand: [
        { opType: "Reshape", name: `${n.name}.batch_split`, inputs: [n.inputs[0]!, ints("split", [-1, k, ...x.slice(1)])], outputs: [split], attrs: new Map() },
        { opType: n.opType, name: n.name, inputs: axesFromInput ? [split, ints("axes", shifted)] : [split], outputs: [reduced], attrs },
        { opType: "Reshape", name: `${n.name}.batch_merge`, inputs: [reduced, ints("merge", [-1, ...out.slice(1)])], outputs: [n.outputs[0]!], attrs: new Map() },
      ],
    };
  };
}

/** The lowerings this file adds, keyed by ONNX op (infer.ts merges them into its table). */
export const TRANSFORMER_LOWERINGS: Record<string, Lowering> = {
  LayerNormalization, MatMul, Pow,
  ...Object.fromEntries(Object.entries({ ReduceMean, ReduceSum, ReduceMax, ReduceL2, ReduceSumSquare, ReduceL1 }).map(([op, f]) => [op, batchSplit(f)])),
  Sqrt: tensor.Unary, Reciprocal: tensor.Unary, Exp: tensor.Unary, Neg: tensor.Unary, Log: tensor.Unary, Abs: tensor.Unary,
  Sin: tensor.Unary, Cos: tensor.Unary,
};
