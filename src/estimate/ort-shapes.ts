/**
 * Output shapes of ops ONNX Runtime runs and memlane-rt does not, for the estimate's replay of
 * ORT's run (ort-pattern.ts): shape-only lowerings merged into the compiler's inference there,
 * never into a compile. Without them one such op anywhere in a graph (a PReLU, a LogSoftmax
 * head, a ConvTranspose decoder, BART's ScatterND on the token ids) stopped the inference, and
 * the ORT estimate lost every activation term: DINOv2's bicubic Resize, before memlane-rt
 * learnt it, left python-ort 42 % under. ORT's planner needs each value's bytes and dtype, not
 * its values, so a rule here is the op's shape arithmetic only.
 *
 * Not here: ops whose output size depends on the data (NonZero, Unique, Compress); the
 * estimate still says why it has no activations for a graph with one.
 */
import { attrInt, attrInts, attrString, normAxis } from "../compiler/attrs.ts";
import { type DType, fmtShape, symDim } from "../compiler/ir.ts";
import { type Lowering, type OpCtx, shapeError } from "../compiler/op-ctx.ts";
import { dtypeOfOnnx } from "../compiler/graph-inputs.ts";
import { LOWERINGS } from "../compiler/infer.ts";
import { ArgMax } from "../compiler/ops-argmax.ts";
import { splitSizes } from "../compiler/ops-cnn.ts";
import { transposeWindow } from "../compiler/ops-conv-transpose.ts";
import { sliceExtent } from "../compiler/ops-layout.ts";
import { transposePerm } from "../compiler/ops-tensor.ts";
import { ortEinsumLabels } from "./ort-einsum.ts";
import { ortLstmShapes } from "./ort-lstm.ts";
import { ORT_CONTRIB_SHAPE_LOWERINGS } from "./ort-shapes-contrib.ts";
import { ORT_QUANTIZED_SHAPE_LOWERINGS } from "./ort-shapes-quantized.ts";

/** Input i's shape, constant or computed (-k at the batch). */
const shapeOf = (c: OpCtx, i: number): number[] => c.weight(i)?.dims.slice() ?? c.actAny(i);
const constInts = (c: OpCtx, i: number): number[] | undefined => {
  const w = c.node.inputs[i] ? c.weight(i) : undefined;
  if (c.node.inputs[i] && !w) throw shapeError(c, `input ${i} ("${c.node.inputs[i]}") is computed at run time; its values set the output's shape`);
  return w ? Array.from(w.data) : undefined;
};

/** The output is input `from`'s shape (elementwise ops, a scatter into its data). */
const sameAs = (from: number, dtype?: DType): Lowering => (c) => ({ shapes: [shapeOf(c, from)], dtypes: [dtype ?? c.dtype(from) ?? "float32"], attrs: {} });

/** PReLU and other ops broadcasting a parameter against X: the broadcast shape. */
const broadcast: Lowering = (c) => {
  const shapes = c.node.inputs.map((_, i) => shapeOf(c, i));
  const rank = Math.max(...shapes.map((s) => s.length));
  const out = Array.from({ length: rank }, (_, k) => {
    const dims = shapes.map((s) => s[s.length - rank + k] ?? 1).filter((d) => d !== 1);
    return dims[0] ?? 1;
  });
  return { shapes: [out], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
};

/** ReduceMin, ReduceProd, ReduceLogSum(Exp): axes from the input (opset 18) or the attribute, none = all. */
const reduce: Lowering = (c) => {
  const x = shapeOf(c, 0);
  // Axes became an input at opset 18, ReduceSum's at 13.
  const raw = c.opset >= (c.node.opType === "ReduceSum" ? 13 : 18) ? constInts(c, 1) : attrInts(c.node, "axes");
  const none = !raw || raw.length === 0;
  if (none && attrInt(c.node, "noop_with_empty_axes", 0)) return { shapes: [x], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
  const axes = none ? x.map((_, i) => i) : raw.map((a) => normAxis(c.node, a, x.length));
  const keep = attrInt(c.node, "keepdims", 1) === 1;
  const out = keep ? x.map((d, i) => (axes.includes(i) ? 1 : d)) : x.filter((_, i) => !axes.includes(i));
  return { shapes: [out], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
};

/** TopK: values and int64 indices, k along the axis (k an input from opset 10, an attribute before). */
const topK: Lowering = (c) => {
  const x = shapeOf(c, 0);
  const axis = normAxis(c.node, attrInt(c.node, "axis", -1), x.length);
  const k = c.opset >= 10 ? constInts(c, 1)?.[0] : attrInt(c.node, "k", -1);
  if (k === undefined || !(k >= 0)) throw shapeError(c, "K is missing");
  const out = x.map((d, i) => (i === axis ? k : d));
  return { shapes: [out, out], dtypes: [c.dtype(0) ?? "float32", "int64"], attrs: {} };
};

/**
 * Transpose of any element type (XLNet turns its int64 token ids time-major), the batch
 * anywhere; the compiler's rule is memlane-rt's, float32 only.
 */
const transpose: Lowering = (c) => {
  const x = shapeOf(c, 0);
  const perm = transposePerm(c, x);
  return { shapes: [perm.map((p) => x[p]!)], dtypes: [c.dtype(0) ?? "float32"], attrs: { perm } };
};

/**
 * Einsum as ORT runs it, one kernel of any number of operands, a weight anywhere: the output's
 * dims by label (an extent of 1 broadcasts), the first operand's type, the equation kept for
 * its scratch (ort-einsum.ts). The compiler's rule is memlane-rt's rewrite into MatMuls, of one
 * or two operands with the batch kept.
 */
const einsum: Lowering = (c) => {
  const equation = attrString(c.node, "equation", "");
  const shapes = c.node.inputs.map((_, i) => shapeOf(c, i));
  const parsed = ortEinsumLabels(equation, shapes.map((s) => s.length));
  if (typeof parsed === "string") throw shapeError(c, `equation "${equation}": ${parsed}`);
  const extentOf = new Map<string, number>();
  parsed.terms.forEach((t, k) => t.forEach((l, a) => {
    const d = shapes[k]![a]!;
    if ((extentOf.get(l) ?? 1) === 1) extentOf.set(l, d);
  }));
  return { shapes: [parsed.out.map((l) => extentOf.get(l)!)], dtypes: [c.dtype(0) ?? "float32"], attrs: { equation } };
};

/** EyeLike: the input's 2-D shape, of the dtype the attribute names (the input's without one). */
const eyeLike: Lowering = (c) => {
  const named = attrInt(c.node, "dtype", 0);
  return { shapes: [shapeOf(c, 0)], dtypes: [(named ? dtypeOfOnnx(named) : undefined) ?? c.dtype(0) ?? "float32"], attrs: {} };
};

/** OneHot: the indices' shape with the depth (a constant input) inserted at the axis, of the values' dtype. */
const oneHot: Lowering = (c) => {
  const indices = shapeOf(c, 0);
  const depth = constInts(c, 1)?.[0];
  if (depth === undefined || !(depth > 0)) throw shapeError(c, "depth is missing");
  const axis = normAxis(c.node, attrInt(c.node, "axis", -1), indices.length + 1);
  const out = [...indices.slice(0, axis), depth, ...indices.slice(axis)];
  return { shapes: [out], dtypes: [c.dtype(2) ?? "float32"], attrs: {} };
};

/**
 * AffineGrid (opset 20): the sampling grid a spatial transformer makes from its predicted theta,
 * [N, H, W, 2] for a size [N, C, H, W] (or [N, D, H, W, 3] for [N, C, D, H, W]); the size is a
 * constant to the replay (Shape of the input, the batch symbolic).
 */
const affineGrid: Lowering = (c) => {
  const size = constInts(c, 1);
  if (!size || (size.length !== 4 && size.length !== 5)) throw shapeError(c, "size must be a constant [N, C, H, W] or [N, C, D, H, W]");
  const dims = size.map((v) => symDim(v) ?? Number.NaN);
  if (dims.some((d) => Number.isNaN(d))) throw shapeError(c, `size ${fmtShape(dims)} is not linear in the batch`);
  return { shapes: [[dims[0]!, ...dims.slice(2), size.length - 2]], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
};

/** GridSample: X's batch and channels at the grid's output positions, [N, C, Ho, Wo] (or [N, C, Do, Ho, Wo]). */
const gridSample: Lowering = (c) => {
  const x = shapeOf(c, 0), grid = shapeOf(c, 1);
  if (grid.length !== x.length) throw shapeError(c, `grid ${fmtShape(grid)} must have X's rank ${x.length}`);
  return { shapes: [[x[0]!, x[1]!, ...grid.slice(1, -1)]], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
};

/** GlobalMaxPool / GlobalLpPool: [N, C, 1, ...]. */
const globalPool: Lowering = (c) => {
  const x = shapeOf(c, 0);
  return { shapes: [x.map((d, i) => (i < 2 ? d : 1))], attrs: {} };
};

/** DepthToSpace and SpaceToDepth: blocks of the channels moved to the spatial axes, or back. */
const depthSpace = (toSpace: boolean): Lowering => (c) => {
  const x = shapeOf(c, 0);
  const b = attrInt(c.node, "blocksize", 0);
  if (x.length !== 4 || !(b > 0)) throw shapeError(c, `needs X [N, C, H, W] and a blocksize, found ${fmtShape(x)}, ${b}`);
  const [n, ch, h, w] = x as [number, number, number, number];
  return { shapes: [toSpace ? [n, ch / (b * b), h * b, w * b] : [n, ch * b * b, h / b, w / b]], attrs: {} };
};

/** ConvTranspose: the compiler's rule (ops-conv-transpose.ts transposeWindow), over any number of spatial axes. */
const convTranspose: Lowering = (c) => {
  const x = shapeOf(c, 0);
  const w = shapeOf(c, 1);
  const out = transposeWindow(c.node, x.slice(2), w.slice(2)).out;
  return { shapes: [[x[0]!, w[1]! * attrInt(c.node, "group", 1), ...out]], attrs: {} };
};

/**
 * Output spatial dims of an N-D window (Conv, MaxPool, AveragePool over 3 or more spatial axes:
 * a video net's or a 3-D U-Net's Conv3d and pools): ONNX's formula, explicit pads or auto_pad,
 * floor or (pools) ceil_mode. The compiler's rules take 1-D and 2-D windows (memlane-rt runs
 * no other); ORT's CPU runs these, so its replay needs their shapes.
 */
function windowNd(c: OpCtx, spatial: readonly number[], kernel: readonly number[], ceil: boolean): number[] {
  const k = spatial.length;
  const at = (name: string, def: number) => attrInts(c.node, name) ?? new Array<number>(k).fill(def);
  const [strides, dilations] = [at("strides", 1), at("dilations", 1)];
  const pads = attrInts(c.node, "pads") ?? new Array<number>(2 * k).fill(0);
  if ([strides, dilations, kernel].some((a) => a.length !== k) || pads.length !== 2 * k) {
    throw shapeError(c, `a ${k}-D window needs ${k} kernel, stride and dilation entries and ${2 * k} pads, found kernel [${kernel}], strides [${strides}], pads [${pads}]`);
  }
  const autoPad = c.node.attrs.has("auto_pad") ? String(c.node.attrs.get("auto_pad")) : "NOTSET";
  return spatial.map((d, i) => {
    if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") return Math.ceil(d / strides[i]!);
    const span = d + (autoPad === "VALID" ? 0 : pads[i]! + pads[i + k]!) - ((kernel[i]! - 1) * dilations[i]! + 1);
    let o = (ceil ? Math.ceil(span / strides[i]!) : Math.floor(span / strides[i]!)) + 1;
    if (ceil && (o - 1) * strides[i]! >= d + pads[i]!) o--;
    if (o < 1) throw shapeError(c, `the window does not fit the input ${fmtShape(shapeOf(c, 0))}`);
    return o;
  });
}

/** Conv over any number of spatial axes: the compiler's rule for 1-D and 2-D (with its attributes), ONNX's formula beyond. */
const convNd: Lowering = (c) => {
  const x = shapeOf(c, 0);
  if (x.length <= 4) return LOWERINGS.Conv!(c);
  const w = shapeOf(c, 1);
  if (w.length !== x.length) throw shapeError(c, `Conv weight W must have X's rank ${x.length}, found ${fmtShape(w)}`);
  return { shapes: [[x[0]!, w[0]!, ...windowNd(c, x.slice(2), attrInts(c.node, "kernel_shape") ?? w.slice(2), false)]], attrs: { group: attrInt(c.node, "group", 1) } };
};

/** MaxPool and AveragePool over any number of spatial axes: `lowRank` for 1-D and 2-D, as convNd. */
const poolNd = (lowRank: Lowering): Lowering => (c) => {
  const x = shapeOf(c, 0);
  if (x.length <= 4) return lowRank(c);
  const kernel = attrInts(c.node, "kernel_shape");
  if (!kernel) throw shapeError(c, "kernel_shape is required");
  const y = [x[0]!, x[1]!, ...windowNd(c, x.slice(2), kernel, attrInt(c.node, "ceil_mode", 0) === 1)];
  // MaxPool's optional Indices: int64, Y's shape.
  return { shapes: c.node.outputs.map(() => y), dtypes: c.node.outputs.map((_, i) => (i === 0 ? (c.dtype(0) ?? "float32") : "int64")), attrs: {} };
};

/**
 * MatMul of two activations that carry the batch on different axes, A [batch, K] and B [K, batch]:
 * CLIP's image-text logits (image embeddings times text embeddings transposed), a [batch, batch]
 * tensor. The replay's sizes are linear in the batch, so it counts that tensor as [batch, 1]:
 * the batch times less, a few bytes a sample next to the towers' activations. The compiler's
 * rule (memlane-rt runs one batch axis) for everything else.
 */
const matMulBatchBoth: Lowering = (c) => {
  const [a, b] = [shapeOf(c, 0), shapeOf(c, 1)];
  if (!c.weight(0) && !c.weight(1) && a.length === 2 && b.length === 2 && a[0]! < 0 && b[1]! < 0 && a[1] === b[0]) {
    return { shapes: [[a[0]!, 1]], attrs: {} };
  }
  return LOWERINGS.MatMul!(c);
};

/** GRU and RNN, layout 0 (ORT's CPU kernels run no other, as for LSTM): Y [S, D, N, H] and Y_h [D, N, H]. */
const recurrent: Lowering = (c) => {
  if (attrInt(c.node, "layout", 0) !== 0) throw shapeError(c, "layout 1: ONNX Runtime's CPU kernel runs layout 0 only");
  const x = shapeOf(c, 0);
  if (x.length !== 3) throw shapeError(c, `X must have rank 3 [S, N, I], found ${fmtShape(x)}`);
  const d = c.node.attrs.has("direction") && String(c.node.attrs.get("direction")) === "bidirectional" ? 2 : 1;
  const h = attrInt(c.node, "hidden_size", 0);
  // What the GRU's scratch needs (ort-gru.ts): the batch is X's axis 1 where it is negative.
  const attrs = { hiddenSize: h, directions: d, reverse: String(c.node.attrs.get("direction") ?? "") === "reverse" ? 1 : 0, seq: x[0]!, batch: x[1]!, inputSize: x[2]!, linearBeforeReset: attrInt(c.node, "linear_before_reset", 0) };
  return { shapes: [[x[0]!, d, x[1]!, h], [d, x[1]!, h]], attrs };
};

/**
 * Split on any axis but the batch's, wherever the batch is: a ViT's attention splits its
 * [3, N, heads, S, d] query/key/value stack on axis 0 (the compiler's rule wants the batch first).
 */
const split: Lowering = (c) => {
  const x = shapeOf(c, 0);
  const axis = normAxis(c.node, attrInt(c.node, "axis", 0), x.length);
  if (x[axis]! < 0) throw shapeError(c, `axis ${axis} of ${fmtShape(x)} is the batch`);
  const sizes = splitSizes(c.node, c.opset >= 13 ? constInts(c, 1) : attrInts(c.node, "split"), x[axis]!);
  if (typeof sizes === "string") throw shapeError(c, `axis ${axis} of ${fmtShape(x)}: ${sizes}`);
  return { shapes: sizes.map((d) => x.map((v, i) => (i === axis ? d : v))), dtypes: sizes.map(() => c.dtype(0) ?? "float32"), attrs: { axis, split: sizes } };
};

/**
 * Slice where an axis that is a multiple of the batch is cut to a smaller multiple:
 * TimeSformer takes each clip's class token as `x[:batch]` of its [frames·batch, ...] tokens.
 * The compiler's rule slices only the whole batch (memlane-rt splits a request along it); ORT
 * slices any range, and the replay needs the size only. Other slices keep the compiler's rule.
 */
const slice: Lowering = (c) => {
  const whole = ORT_QUANTIZED_SHAPE_LOWERINGS.Slice!;  // the compiler's rule, on any element type
  const x = c.actAny(0);
  if (c.opset < 10) return whole(c);
  const [starts, ends] = [constInts(c, 1)!, constInts(c, 2)!];
  const axes = (constInts(c, 3) ?? starts.map((_, i) => i)).map((a) => normAxis(c.node, a, x.length));
  const steps = constInts(c, 4) ?? starts.map(() => 1);
  // A bound j·batch with j < k; 2^31 and beyond otherwise means "to the end".
  const cutsBatch = axes.some((a, i) => x[a]! < 0 && (symDim(ends[i]!) ?? 0) < 0 && symDim(ends[i]!)! > x[a]!);
  if (!cutsBatch) return whole(c);
  const out = [...x];
  axes.forEach((a, i) => {
    const d = x[a]!, start = starts[i]!, end = symDim(ends[i]!), step = steps[i]!;
    if (d < 0) {
      // [0, j·batch) of k·batch, j < k: j·batch.
      if (start !== 0 || step !== 1 || end === undefined || end >= 0) throw shapeError(c, `axis ${a} of ${fmtShape(x)} is sliced from ${start} to ${ends[i]} by ${step}; only [0, j·batch) of a batch multiple is followed`);
      out[a] = Math.max(end, d);
      return;
    }
    out[a] = sliceExtent(d, start, ends[i]!, step).count;
  });
  return { shapes: [out], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
};

const SAME_SHAPE = [
  "Softplus", "Softsign", "Elu", "Selu", "Celu", "Mish", "ThresholdedRelu", "Shrink", "LogSoftmax", "Hardmax",
  "Floor", "Ceil", "Round", "Sign", "Trilu", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
  "LpNormalization", "MeanVarianceNormalization", "BitwiseNot",
];

/**
 * Shape-only lowerings for ORT's replay, keyed by ONNX op. inferGraph takes them before its own,
 * so an op here replaces the compiler's rule (LSTM: ORT's layout 0); every other op is one the
 * compiler has no lowering for.
 */
/**
 * Resize and Upsample with the attributes ORT's NCHWc rewrite reads (ort-nchwc.ts: a nearest
 * resize by whole spatial factors runs on the blocked tensor): the compiler's rule keeps none on
 * the one node the replay runs for them.
 */
const withResizeAttrs = (resize: Lowering): Lowering => (c) => {
  // A Resize to its input's own size is a view to the compiler (a Reshape) and a copy to ORT's
  // kernel (UperNet's 6x6 pyramid level resized to 6x6).
  const { op, ...copy } = resize(c);
  const low = op === "Reshape" ? copy : { ...copy, ...(op ? { op } : {}) };
  const opset10 = c.node.opType === "Upsample" || c.opset < 11;
  const scales = c.node.inputs[opset10 ? 1 : 2] ? c.weight(opset10 ? 1 : 2) : undefined;
  const text = (name: string) => {
    const a = c.node.attrs.get(name);
    return typeof a === "string" ? { [name]: a } : {};
  };
  return {
    ...low,
    attrs: {
      ...low.attrs, ...text("mode"), ...text("coordinate_transformation_mode"), ...text("nearest_mode"),
      ...(scales ? { scales: Array.from(scales.data) } : {}), ...(!opset10 && c.node.inputs[3] ? { sizes_given: 1 } : {}), ...(opset10 ? { opset10: 1 } : {}),
    },
  };
};

export const ORT_SHAPE_LOWERINGS: Readonly<Record<string, Lowering>> = {
  ...Object.fromEntries(SAME_SHAPE.map((op) => [op, sameAs(0)])),
  IsInf: sameAs(0, "bool"),
  CastLike: (c) => ({ shapes: [shapeOf(c, 0)], dtypes: [c.dtype(1) ?? "float32"], attrs: {} }),
  PRelu: broadcast,
  ScatterND: sameAs(0), ScatterElements: sameAs(0),
  ReduceMin: reduce, ReduceProd: reduce, ReduceLogSum: reduce, ReduceLogSumExp: reduce,
  ArgMin: ArgMax,  // the compiler's ArgMax rule: the same shape, int64
  TopK: topK,
  EyeLike: eyeLike, OneHot: oneHot,
  Einsum: einsum,
  GlobalMaxPool: globalPool, GlobalLpPool: globalPool,
  AffineGrid: affineGrid, GridSample: gridSample,
  DepthToSpace: depthSpace(true), SpaceToDepth: depthSpace(false),
  ConvTranspose: convTranspose,
  Conv: convNd,
  MatMul: matMulBatchBoth,
  GRU: recurrent, RNN: recurrent,
  Split: split,
  // An integer ReduceSum (an optimized BERT's mask lengths); the compiler's rule sums float32 only.
  ReduceSum: (c) => (c.dtype(0) === "float32" ? LOWERINGS.ReduceSum!(c) : reduce(c)),
  LSTM: ortLstmShapes,
  // A half-precision model's normalisation ORT runs on float16 (ort-fp16.ts): X's shape and type.
  LayerNormalization: (c) => (c.dtype(0) === "float16" ? sameAs(0)(c) : LOWERINGS.LayerNormalization!(c)),
  ...ORT_QUANTIZED_SHAPE_LOWERINGS,
  ...ORT_CONTRIB_SHAPE_LOWERINGS,
  Slice: slice,
  Transpose: transpose,  // any element type: int64 ids too, not the 8-bit and float16 only
  MaxPool: poolNd(ORT_QUANTIZED_SHAPE_LOWERINGS.MaxPool!),
  AveragePool: poolNd(LOWERINGS.AveragePool!),
  Resize: withResizeAttrs(ORT_QUANTIZED_SHAPE_LOWERINGS.Resize!),
  ...(LOWERINGS.Upsample ? { Upsample: withResizeAttrs(LOWERINGS.Upsample) } : {}),
};
