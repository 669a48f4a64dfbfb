/**
 * Lowerings of the CNN activations and data-movement ops (Clip, HardSigmoid, HardSwish,
 * Pad, Split, Concat with constant inputs): ONNX defaults resolved, bounds and pads taken
 * from constant inputs, output shapes. See docs/plan-format.md for the plan attributes.
 */
import { attrFloat, attrInt, attrInts, attrString, normAxis } from "./attrs.ts";
import { mk } from "./fold-math.ts";
import { type ConstTensor, type Node, batchAxis, fmtShape } from "./ir.ts";
import { type Lowering, type OpCtx, floatAct, shapeError } from "./op-ctx.ts";

/** A scalar-or-list constant input's values, or undefined when the input is absent. */
function constInput(c: OpCtx, i: number, what: string): number[] | undefined {
  if (!c.node.inputs[i]) return undefined;
  const w = c.weight(i);
  if (!w) throw shapeError(c, `${what} (input ${i}, "${c.node.inputs[i]}") is computed at run time; memlane-rt needs it known at compile time`);
  return Array.from(w.data);
}

function scalarInput(c: OpCtx, i: number, what: string): number | undefined {
  const v = constInput(c, i, what);
  if (v === undefined) return undefined;
  if (v.length !== 1) throw shapeError(c, `${what} must be a scalar, found ${v.length} values`);
  return v[0]!;
}

/** Clip (ReLU6 and friends): bounds from constant inputs (opset >= 11) or attributes; an absent bound is omitted. */
export const Clip: Lowering = (c) => {
  const x = floatAct(c, 0);  // element-wise: any layout (Swin-V2 clamps norms of [64·batch, ...])
  const attrs: Record<string, number> = {};
  const lo = c.opset >= 11 ? scalarInput(c, 1, "Clip min") : c.node.attrs.has("min") ? attrFloat(c.node, "min", 0) : undefined;
  const hi = c.opset >= 11 ? scalarInput(c, 2, "Clip max") : c.node.attrs.has("max") ? attrFloat(c.node, "max", 0) : undefined;
  // An infinite or float32-max bound is no bound (msgpack would not carry +-inf as a whole number).
  if (lo !== undefined && Number.isFinite(lo) && lo > -3.4e38) attrs.min = lo;
  if (hi !== undefined && Number.isFinite(hi) && hi < 3.4e38) attrs.max = hi;
  if (attrs.min !== undefined && attrs.max !== undefined && attrs.min > attrs.max) throw shapeError(c, `min ${attrs.min} > max ${attrs.max}`);
  return { shapes: [x], attrs, inputs: [c.node.inputs[0]!] };
};

export const HardSigmoid: Lowering = (c) => ({
  shapes: [floatAct(c, 0)],
  attrs: { alpha: attrFloat(c.node, "alpha", 0.2), beta: attrFloat(c.node, "beta", 0.5) },
});

export const HardSwish: Lowering = (c) => ({ shapes: [floatAct(c, 0)], attrs: {} });

const PAD_MODES = ["constant", "reflect", "edge"];

/** Pad: pads (and value, axes) from constant inputs (opset >= 11) or attributes; never the batch. */
export const Pad: Lowering = (c) => {
  const x = c.act(0);
  const r = x.length;
  const mode = attrString(c.node, "mode", "constant");
  if (!PAD_MODES.includes(mode)) throw shapeError(c, `mode "${mode}" is not supported (expected one of ${PAD_MODES.join(", ")})`);
  const raw = c.opset >= 11 ? constInput(c, 1, "Pad pads") : attrInts(c.node, "pads");
  if (!raw) throw shapeError(c, "pads are required");
  const value = c.opset >= 11 ? (scalarInput(c, 2, "Pad constant_value") ?? 0) : attrFloat(c.node, "value", 0);
  const axes = (c.opset >= 18 ? constInput(c, 3, "Pad axes") : undefined)?.map((a) => (a < 0 ? a + r : a)) ?? x.map((_, i) => i);
  if (raw.length !== 2 * axes.length) throw shapeError(c, `pads has ${raw.length} entries for ${axes.length} axes of ${fmtShape(x)}`);
  const pads = new Array<number>(2 * r).fill(0);
  axes.forEach((a, i) => {
    if (a < 0 || a >= r) throw shapeError(c, `axis ${a} is out of range for ${fmtShape(x)}`);
    pads[a] = raw[i]!;
    pads[r + a] = raw[axes.length + i]!;
  });
  if (pads[0] !== 0 || pads[r] !== 0) throw shapeError(c, `pads [${raw}] pad the batch dimension of ${fmtShape(x)}`);
  const out = x.map((d, i) => (i === 0 ? d : d + pads[i]! + pads[r + i]!));
  if (out.some((d, i) => i > 0 && d < 0)) throw shapeError(c, `pads [${raw}] crop ${fmtShape(x)} below zero`);
  if (mode === "reflect" && x.some((d, i) => i > 0 && (pads[i]! >= d || pads[r + i]! >= d))) {
    throw shapeError(c, `reflect pads [${raw}] must be smaller than the dimensions of ${fmtShape(x)}`);
  }
  return { shapes: [out], attrs: { pads, mode, value }, inputs: [c.node.inputs[0]!] };
};

/**
 * Split's part sizes along an axis of extent d: the given sizes (the constant input from opset
 * 13, the attribute before), or num_outputs (opset 18) or equal parts; or why they do not fit.
 * Shared by the lowering and fold.ts (GPT-J splits its constant sin/cos table).
 */
export function splitSizes(n: Node, given: number[] | undefined, d: number): number[] | string {
  const count = n.outputs.length;
  let split = given;
  if (!split) {
    const num = n.attrs.has("num_outputs") ? attrInt(n, "num_outputs", count) : count;
    if (num !== count) return `num_outputs ${num} differs from the node's ${count} outputs`;
    // opset 18: equal parts of ceil(d / n), the last one smaller; before, d must divide evenly.
    const size = Math.ceil(d / count);
    if (!n.attrs.has("num_outputs") && d % count !== 0) return `an extent of ${d} does not split into ${count} equal parts`;
    split = Array.from({ length: count }, (_, i) => Math.max(0, Math.min(size, d - i * size)));
  }
  if (split.length !== count || split.reduce((a, b) => a + b, 0) !== d || split.some((v) => v < 0)) {
    return `split [${split}] does not divide an extent of ${d} into ${count} outputs`;
  }
  return split;
}

/** Split: sizes from the constant input (opset >= 13), the attribute, num_outputs (opset 18) or equal parts. */
export const Split: Lowering = (c) => {
  const moved = floatAct(c, 0);
  const at = batchAxis(moved);
  if (at !== 0 && normAxis(c.node, attrInt(c.node, "axis", 0), moved.length) !== at) return splitWithBatchMoved(c, moved, at);
  // The batch first, or k·batch (windows or heads merged into it: Swin's and TinyViT's attention).
  const x = at === 0 ? moved : c.act(0);
  const axis = normAxis(c.node, attrInt(c.node, "axis", 0), x.length);
  if (axis < 1) throw shapeError(c, "splitting the batch is not supported");
  const split = splitSizes(c.node, c.opset >= 13 ? constInput(c, 1, "Split split") : attrInts(c.node, "split"), x[axis]!);
  if (typeof split === "string") throw shapeError(c, `axis ${axis} of ${fmtShape(x)}: ${split}`);
  return {
    shapes: split.map((s) => x.map((v, i) => (i === axis ? s : v))),
    attrs: { axis, split },
    inputs: [c.node.inputs[0]!],
  };
};

/**
 * A Split of a tensor whose batch a Transpose moved off the first axis, as ONNX nodes: a
 * Transpose that brings the batch first, the Split along the same axis there, and a Transpose
 * of each part back to the input's order. timm's attention writes its fused projection as
 * [3, batch, heads, tokens, head size] and unbinds q, k and v along the first axis (ViT,
 * DeiT, EdgeNeXt); the split kernel takes the batch first, and the two copies are each the size
 * of the parts.
 */
function splitWithBatchMoved(c: OpCtx, x: number[], at: number): ReturnType<Lowering> {
  const n = c.node;
  const axis = normAxis(n, attrInt(n, "axis", 0), x.length);
  const toFront = [at, ...x.map((_, i) => i).filter((i) => i !== at)];
  const back = toFront.map((_, i) => toFront.indexOf(i));
  const front = c.freshName(`${n.outputs[0]}.batch_first`);
  const parts = n.outputs.map((o) => (o ? c.freshName(`${o}.batch_first`) : ""));
  const attrs = new Map(n.attrs);
  attrs.set("axis", toFront.indexOf(axis));
  return {
    shapes: [], attrs: {},
    expand: [
      { opType: "Transpose", name: `${n.name}.batch_first`, inputs: [n.inputs[0]!], outputs: [front], attrs: new Map([["perm", toFront]]) },
      { opType: "Split", name: n.name, inputs: [front, ...n.inputs.slice(1)], outputs: parts, attrs },
      ...n.outputs.flatMap((o, i) => (o ? [{ opType: "Transpose", name: `${n.name}.batch_back${i}`, inputs: [parts[i]!], outputs: [o], attrs: new Map([["perm", back]]) }] : [])),
    ],
  };
}

/**
 * Concat of activations and constants: a constant takes part with a leading 1 in the full
 * rank (a class token at a static batch of 1) and is repeated for every sample. Activations
 * may have the batch on any axis but `axis` (the same one in each: nn.LSTM's h_n [L, batch, H]).
 */
export const Concat: Lowering = (c) => {
  const parts = c.node.inputs.map((name, i) => {
    const w = c.weight(i);
    return w ? { w, dims: w.dims } : { w: undefined as ConstTensor | undefined, dims: c.actAny(i) };
  });
  const act = parts.find((p) => !p.w)!;
  // Any one dtype (int64 index tuples too); constants are stored as the activations' dtype.
  const dt = c.dtype(parts.indexOf(act))!;
  const other = parts.findIndex((p, i) => !p.w && c.dtype(i) !== dt);
  if (other >= 0) throw shapeError(c, `inputs are ${dt} and ${c.dtype(other)}; Concat needs one dtype`);
  const r = act.dims.length;
  const bax = batchAxis(act.dims);
  const axis = normAxis(c.node, attrInt(c.node, "axis", 0), r);
  if (axis === bax) throw shapeError(c, "concatenating along the batch is not supported");
  const inputs = [...c.node.inputs];
  parts.forEach((p, i) => {
    if (p.w && (p.dims.length !== r || p.dims[0] !== 1 || bax !== 0)) {
      throw shapeError(c, `constant input ${i} [${p.dims}] must have rank ${r} and a leading 1 to be repeated over the batch of ${fmtShape(act.dims)} (batch first)`);
    }
    if (p.dims.length !== r || p.dims.some((d, k) => k !== axis && d !== act.dims[k] && !(p.w && k === 0))) {
      throw shapeError(c, `inputs ${parts.map((q) => fmtShape(q.dims)).join(", ")} disagree outside axis ${axis}`);
    }
    if (p.w) inputs[i] = c.constAs(i, dt);
  });
  const out = [...act.dims];
  out[axis] = parts.reduce((a, p) => a + p.dims[axis]!, 0);
  return { shapes: [out], dtypes: [dt], attrs: { axis }, inputs };
};
