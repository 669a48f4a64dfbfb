/**
 * Shape-changing ops on run-time data, with the batch at any axis: Reshape (and Unsqueeze /
 * Squeeze, which become Reshape), Expand, Slice, and the batch-sized generators Range and
 * ConstantOfShape. Constant shape inputs may hold k·batch values (ir.ts, SYM_BATCH).
 */
import { attrInts, attrTensor, attrInt, attrString, normAxis } from "./attrs.ts";
import { mk } from "./fold-math.ts";
import { type DType, BATCH, batchAxis, defaultDtype, fmtDim, fmtShape, mergedDim, perSample, symDim, symValue } from "./ir.ts";
import { type Lowered, type Lowering, type OpCtx, addInts, shapeError } from "./op-ctx.ts";
import { broadcastShapes } from "./ops-data.ts";

function constInts(c: OpCtx, i: number, what: string): number[] {
  const w = c.weight(i);
  if (!w) throw shapeError(c, `${what} ("${c.node.inputs[i]}") is computed at run time; only values known at compile time are supported`);
  return Array.from(w.data);
}

/** A folded shape value as a plan dimension, or an error naming the op when non-linear in the batch. */
function dimOf(c: OpCtx, v: number, what: string): number {
  const d = symDim(v);
  if (d === undefined) throw shapeError(c, `${what} depends on the batch non-linearly (not k·batch)`);
  return d;
}

function reshapeTo(c: OpCtx, x: number[], out: number[]) {
  if (out.filter((d) => d < 0).length !== 1 || perSample(out) !== perSample(x) || out.some((d) => !Number.isInteger(d) || d === 0)) {
    throw shapeError(c, `cannot reshape ${fmtShape(x)} to ${fmtShape(out)} keeping one batch dimension`);
  }
  return { op: "Reshape", shapes: [out], dtypes: [c.dtype(0)!], inputs: [c.node.inputs[0]!], attrs: { shape: out } };
}

/** ONNX Reshape: 0 copies (unless allowzero), one -1 is inferred and takes the batch if no other entry does. */
export const Reshape: Lowering = (c) => {
  const x = c.actAny(0);
  const raw = constInts(c, 1, "the target shape");
  const allowZero = attrInt(c.node, "allowzero", 0) === 1;
  const dims = raw.map((v, i) => (v === -1 ? -1 : v === 0 && !allowZero ? x[i]! : dimOf(c, v, `target entry ${i}`)));
  const inferAt = raw.indexOf(-1);
  let hasBatch = dims.some((d, i) => d < 0 && i !== inferAt);
  const at = batchAxis(x) < dims.length ? batchAxis(x) : 0;
  if (!hasBatch && at !== inferAt && c.staticBatch !== undefined && dims[at] === c.staticBatch) {
    // A model exported with a fixed batch spells it as a number where the batch stays.
    c.warn(`${c.node.name}: Reshape fixes dimension ${at} to ${dims[at]}, the model's static batch; treated as the batch`);
    dims[at] = BATCH;
    hasBatch = true;
  }
  if (inferAt >= 0) {
    const known = perSample(dims.filter((_, i) => i !== inferAt));
    const k = perSample(x) / known;
    if (!Number.isInteger(k) || k < 1) throw shapeError(c, `cannot reshape ${fmtShape(x)} to [${dims.map((d, i) => (i === inferAt ? "-1" : fmtDim(d))).join(", ")}]`);
    dims[inferAt] = hasBatch ? k : -k;
  } else if (!hasBatch) {
    throw shapeError(c, `target [${raw.map((v) => fmtDim(v))}] fixes every dimension; the batch of ${fmtShape(x)} would be lost`);
  }
  return reshapeTo(c, x, dims);
};

/**
 * Flatten on what the float32, batch-first Flatten kernel does not take (a bool mask, a
 * batch on another axis): the same result as a Reshape to [prod(x[:axis]), prod(x[axis:])],
 * one of which carries the batch (k·batch).
 */
export const FlattenAsReshape: Lowering = (c) => {
  const x = c.actAny(0);
  const raw = attrInt(c.node, "axis", 1);
  const axis = raw < 0 ? raw + x.length : raw;
  if (axis < 0 || axis > x.length) throw shapeError(c, `axis ${raw} is outside the rank of ${fmtShape(x)}`);
  return reshapeTo(c, x, [mergedDim(x.slice(0, axis)), mergedDim(x.slice(axis))]);
};

function axesOf(c: OpCtx, rank: number): number[] | undefined {
  const a = c.opset >= 13 ? (c.node.inputs[1] ? constInts(c, 1, "axes") : undefined) : attrInts(c.node, "axes");
  return a?.map((v) => (v < 0 ? v + rank : v));
}

export const Unsqueeze: Lowering = (c) => {
  const x = c.actAny(0);
  const axes = axesOf(c, x.length + (c.opset >= 13 ? (c.weight(1)?.data.length ?? 0) : (attrInts(c.node, "axes")?.length ?? 0)));
  if (!axes) throw shapeError(c, "axes are required");
  const out = [...x];
  for (const a of [...axes].sort((p, q) => p - q)) out.splice(a, 0, 1);
  return reshapeTo(c, x, out);
};

export const Squeeze: Lowering = (c) => {
  const x = c.actAny(0);
  const axes = axesOf(c, x.length);
  for (const a of axes ?? []) if (x[a] !== 1) throw shapeError(c, `axis ${a} of ${fmtShape(x)} is not 1`);
  return reshapeTo(c, x, x.filter((d, i) => (axes ? !axes.includes(i) : d !== 1)));
};

/** Expand: broadcast a tensor (a weight too, e.g. ViT's class token) to a shape that holds the batch. */
export const Expand: Lowering = (c) => {
  const w = c.weight(0);
  const x = w ? w.dims : c.actAny(0);
  const target = constInts(c, 1, "the shape").map((v, i) => dimOf(c, v, `shape entry ${i}`));
  const shape = broadcastShapes(c, [{ dims: x, isConst: !!w }, { dims: target, isConst: false }]);
  const dt = c.dtype(0)!;
  return { shapes: [shape], dtypes: [dt], inputs: [w ? c.constAs(0, dt) : c.node.inputs[0]!], attrs: {} };
};

/**
 * Tile, as ONNX nodes (Lowered.expand): where every repeated axis has extent 1 it is an Expand
 * to the tiled shape (DeBERTa-v2 tiles its [1, L, L] relative positions by batch·heads);
 * otherwise each repeated axis gets a 1 before it (Reshape), that axis is expanded to the
 * repeats ([r, d]) and the pairs merge back (Reshape [r·d]). Repeats may hold the batch (k·batch).
 */
export const Tile: Lowering = (c) => {
  const w = c.weight(0);
  const x = w ? w.dims : c.actAny(0);
  const reps = constInts(c, 1, "the repeats").map((v, i) => dimOf(c, v, `repeats entry ${i}`));
  if (reps.length !== x.length) throw shapeError(c, `${reps.length} repeats for the rank-${x.length} input ${fmtShape(x)}`);
  const tiled = reps.map((r, i) => r !== 1 && x[i] !== 1);
  if (x.some((d, i) => d < 0 && reps[i]! < 0)) throw shapeError(c, `repeats [${reps.map(fmtDim)}] tile the batch axis of ${fmtShape(x)} by the batch, which is not linear in it`);
  const out = x.map((d, i) => d * reps[i]!);
  if (out.filter((d) => d < 0).length !== 1) {
    throw shapeError(c, `repeats [${reps.map(fmtDim)}] of ${fmtShape(x)} give ${fmtShape(out)}, which needs exactly one batch dimension`);
  }
  if (reps.some((r) => r === 0)) throw shapeError(c, `repeats [${reps.map(fmtDim)}] would give an empty tensor`);
  const ints = (base: string, values: number[], sym: boolean) => addInts(c, `${c.node.name}.${base}`, values, sym);
  const name = c.node.name, input = c.node.inputs[0]!, output = c.node.outputs[0]!;
  if (!tiled.some(Boolean)) {
    const shape = ints("shape", out.map(symValue), out.some((d) => d < 0));
    return { shapes: [], attrs: {}, expand: [{ opType: "Expand", name, inputs: [input, shape], outputs: [output], attrs: new Map() }] };
  }
  // [.., d, ..] -> [.., 1, d, ..] -> [.., r, d, ..] -> [.., r·d, ..]; -1 is Reshape's inferred (batch) entry.
  const split = x.flatMap((d, i) => (tiled[i] ? [1, d] : [d]));
  const wide = x.flatMap((d, i) => (tiled[i] ? [reps[i]!, d] : [reps[i] === 1 ? d : reps[i]!]));
  const mid1 = c.freshName(`${output}.tile.split`), mid2 = c.freshName(`${output}.tile.expand`);
  const asReshape = (dims: number[]) => dims.map((d) => (d < 0 ? -1 : d));
  return {
    shapes: [], attrs: {},
    expand: [
      { opType: "Reshape", name: `${name}.split`, inputs: [input, ints("split", asReshape(split), false)], outputs: [mid1], attrs: new Map() },
      { opType: "Expand", name: `${name}.expand`, inputs: [mid1, ints("wide", wide.map(symValue), wide.some((d) => d < 0))], outputs: [mid2], attrs: new Map() },
      { opType: "Reshape", name, inputs: [mid2, ints("shape", asReshape(out), false)], outputs: [output], attrs: new Map() },
    ],
  };
};

/**
 * DepthToSpace and SpaceToDepth (super-resolution nets' PixelShuffle, and its inverse), as ONNX
 * nodes (Lowered.expand): a Reshape to 6-D that splits the blocks out, a Transpose that moves
 * them next to the spatial axes (or back), a Reshape that merges them. X is [N, C, H, W]
 * with the batch first; DepthToSpace's DCR mode takes the channels as [b, b, C'] and CRD as
 * [C', b, b] (ONNX's definitions); SpaceToDepth puts the blocks before the channels.
 */
const depthSpace = (toSpace: boolean): Lowering => (c) => {
  const x = c.act(0);
  const b = attrInt(c.node, "blocksize", 0);
  const [, ch, h, w] = x as [number, number, number, number];
  if (x.length !== 4 || !(b > 0)) throw shapeError(c, `needs X [N, C, H, W] and a blocksize, found ${fmtShape(x)}, blocksize ${b}`);
  if (toSpace ? ch % (b * b) !== 0 : h % b !== 0 || w % b !== 0)
    throw shapeError(c, `blocksize ${b} does not divide ${toSpace ? `the ${ch} channels by ${b * b}` : `the ${h}x${w} map`} of ${fmtShape(x)}`);
  const crd = toSpace && attrString(c.node, "mode", "DCR") === "CRD";
  const c2 = ch / (b * b);
  const [split, perm, out] = !toSpace ? [[-1, ch, h / b, b, w / b, b], [0, 3, 5, 1, 2, 4], [-1, ch * b * b, h / b, w / b]]
    : crd ? [[-1, c2, b, b, h, w], [0, 1, 4, 2, 5, 3], [-1, c2, h * b, w * b]]
    : [[-1, b, b, c2, h, w], [0, 3, 4, 1, 5, 2], [-1, c2, h * b, w * b]];
  const ints = (base: string, values: number[]) => addInts(c, `${c.node.name}.${base}`, values, false);
  const name = c.node.name, input = c.node.inputs[0]!, output = c.node.outputs[0]!;
  const mid1 = c.freshName(`${output}.blocks.split`), mid2 = c.freshName(`${output}.blocks.moved`);
  return {
    shapes: [], attrs: {},
    expand: [
      { opType: "Reshape", name: `${name}.split`, inputs: [input, ints("split", split)], outputs: [mid1], attrs: new Map() },
      { opType: "Transpose", name: `${name}.move`, inputs: [mid1], outputs: [mid2], attrs: new Map([["perm", perm]]) },
      { opType: "Reshape", name, inputs: [mid2, ints("shape", out)], outputs: [output], attrs: new Map() },
    ],
  };
};
export const DepthToSpace = depthSpace(true);
export const SpaceToDepth = depthSpace(false);

/**
 * OneHot of run-time ids (XLNet's segment ids), as ONNX nodes (Lowered.expand): the ids taken
 * modulo the depth (ONNX's negative ids count from the end), a 1 inserted at the axis, compared
 * with 0..depth-1 laid along that axis, and the comparison picking the on or off value. The
 * depth and the values are constants; a OneHot of constant ids folds (fold.ts).
 */
export const OneHot: Lowering = (c) => {
  const ids = c.actAny(0);
  const depth = constInts(c, 1, "the depth")[0];
  const values = c.weight(2);
  if (depth === undefined || !(depth > 0) || depth >= 2 ** 31) throw shapeError(c, `depth ${depth} is not a positive constant`);
  if (!values || values.data.length !== 2) throw shapeError(c, "values must be a constant [off, on]");
  const axis = normAxis(c.node, attrInt(c.node, "axis", -1), ids.length + 1);
  const dt = defaultDtype(values);
  const name = c.node.name, output = c.node.outputs[0]!;
  const ints = (base: string, v: number[]) => addInts(c, `${name}.${base}`, v, false);
  const scalar = (base: string, v: number) => c.addConst(`${name}.${base}`, { ...mk(values.isFloat, [], [v]), dtype: dt });
  // 0..depth-1 on the output's axis, with 1s after it to broadcast against the ids' later axes.
  const positions = c.addConst(`${name}.positions`, { isFloat: false, dims: [depth, ...new Array<number>(ids.length - axis).fill(1)], data: Float64Array.from({ length: depth }, (_, k) => k), dtype: "int64" });
  const [wrapped, placed, hit] = ["wrapped", "placed", "hit"].map((m) => c.freshName(`${output}.onehot.${m}`)) as [string, string, string];
  return {
    shapes: [], attrs: {},
    expand: [
      { opType: "Mod", name: `${name}.wrap`, inputs: [c.node.inputs[0]!, ints("depth", [depth])], outputs: [wrapped], attrs: new Map() },
      // A Reshape, not Unsqueeze (whose axes moved to an input at opset 13); -1 is the batch.
      { opType: "Reshape", name: `${name}.place`, inputs: [wrapped, ints("placed", [...ids.slice(0, axis), 1, ...ids.slice(axis)].map((d) => (d < 0 ? -1 : d)))], outputs: [placed], attrs: new Map() },
      { opType: "Equal", name: `${name}.hit`, inputs: [placed, positions], outputs: [hit], attrs: new Map() },
      { opType: "Where", name, inputs: [hit, scalar("on", values.data[1]!), scalar("off", values.data[0]!)], outputs: [output], attrs: new Map() },
    ],
  };
};

/** Slice with constant starts/ends/axes/steps on any non-batch axis (negative steps too). */
/** ONNX Slice on an axis of fixed extent d: the clamped start and the element count. */
export function sliceExtent(d: number, start: number, end: number, step: number): { start: number; count: number } {
  const norm = (v: number) => (v < 0 ? v + d : v);
  let s = norm(start), e = norm(end);
  if (step > 0) {
    s = Math.min(Math.max(s, 0), d); e = Math.min(Math.max(e, 0), d);
    return { start: s, count: Math.max(0, Math.ceil((e - s) / step)) };
  }
  s = Math.min(Math.max(s, -1), d - 1); e = Math.min(Math.max(e, -1), d - 1);
  return { start: s, count: Math.max(0, Math.ceil((s - e) / -step)) };
}

export const Slice: Lowering = (c): Lowered => {
  const x = c.actAny(0);
  const r = x.length;
  const newStyle = c.opset >= 10;
  const starts = newStyle ? constInts(c, 1, "starts") : attrInts(c.node, "starts", []);
  const ends = newStyle ? constInts(c, 2, "ends") : attrInts(c.node, "ends", []);
  const axes = ((newStyle ? c.node.inputs[3] && constInts(c, 3, "axes") : attrInts(c.node, "axes")) || starts.map((_, i) => i)).map((a) => (a < 0 ? a + r : a));
  const steps = (newStyle && c.node.inputs[4] && constInts(c, 4, "steps")) || starts.map(() => 1);
  const out = [...x];
  const rAxes: number[] = [], rStarts: number[] = [], rSteps: number[] = [];
  axes.forEach((a, i) => {
    const d = x[a]!, step = steps[i]!;
    if (a < 0 || a >= r || step === 0) throw shapeError(c, `axis ${axes[i]} / step ${step} is invalid for ${fmtShape(x)}`);
    if (d < 0) {
      if (starts[i] === 0 && step === 1 && ends[i]! >= 2 ** 31) return;  // the whole batch
      throw shapeError(c, `slicing the batch axis ${a} of ${fmtShape(x)} is not supported`);
    }
    const { start: s, count } = sliceExtent(d, starts[i]!, ends[i]!, step);
    out[a] = count;
    rAxes.push(a); rStarts.push(s); rSteps.push(step);
  });
  // An empty slice (Phi-3's rotary `q[..., rotary_dim:]` when the whole head rotates) is no
  // tensor: only a Concat may read it, and drops it (infer.ts).
  if (out.includes(0)) return { shapes: [out], attrs: {}, empty: true };
  return { shapes: [out], dtypes: [c.dtype(0)!], inputs: [c.node.inputs[0]!], attrs: { axes: rAxes, starts: rStarts, steps: rSteps } };
};

/** Range(0, k·batch, 1): the only batch-dependent Range (others fold). */
export const Range: Lowering = (c) => {
  const [start, limit, delta] = [0, 1, 2].map((i) => constInts(c, i, `input ${i}`)[0]!);
  const k = symDim(limit!);
  if (start !== 0 || delta !== 1 || k === undefined || k >= 0) throw shapeError(c, `only Range(0, k·batch, 1) depends on the batch; found Range(${fmtDim(start!)}, ${fmtDim(limit!)}, ${fmtDim(delta!)})`);
  const dt: DType = defaultDtype(c.weight(0)!);
  return { shapes: [[k]], dtypes: [dt], inputs: [], attrs: { start: 0, delta: 1 } };
};

export const ConstantOfShape: Lowering = (c) => {
  const shape = constInts(c, 0, "the shape").map((v, i) => dimOf(c, v, `shape entry ${i}`));
  if (shape.filter((d) => d < 0).length !== 1) throw shapeError(c, `shape ${fmtShape(shape)} must hold the batch once`);
  const v = attrTensor(c.node, "value");
  const dt: DType = v ? defaultDtype(v) : "float32";
  return { shapes: [shape], dtypes: [dt], inputs: [], attrs: { value: v ? v.data[0]! : 0 } };
};
