/**
 * Resize (and the older Upsample) of the last one or two axes, nearest, linear or cubic,
 * rewritten into ops every backend has: an axis of n_in -> n_out is a MatMul by a constant
 * [n_in, n_out] matrix whose column j holds output j's taps and weights (one 1 for nearest, two
 * weights for linear, four for cubic), so Y = X · A_w over the last axis, and, for the row axis,
 * a Transpose to put it last, the MatMul by A_h and the Transpose back. Bicubic is separable
 * like bilinear (ONNX Runtime weighs the 4x4 taps by products of the two axes' weights), so
 * one matrix an axis holds it too. The matrices follow ONNX's coordinate transforms
 * (half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn) and nearest
 * roundings, and ONNX Runtime's edges: for linear the source coordinate clamped to the axis,
 * its two taps the floor and the next, the last repeated; for cubic the coordinate as it is,
 * taps outside the axis read at its nearest end, or with `exclude_outside` dropped and the
 * others' weights scaled to sum to 1. The product does n_in multiply-adds an output, not 1 to
 * 4: a segmentation head's 4x upsampling of 128x128 maps costs 128 a pixel and axis.
 * Antialiasing, tf_crop_and_resize and resizing the batch or channel axes are refused with the
 * reason.
 */
import { attrFloat, attrInt, attrInts, attrString } from "./attrs.ts";
import { type Node, fmtShape, SYM_BATCH } from "./ir.ts";
import { floatAct, type Lowered, type Lowering, type OpCtx, shapeError } from "./op-ctx.ts";

type Coord = (j: number, nIn: number, nOut: number, scale: number) => number;

const COORDS: Record<string, Coord> = {
  half_pixel: (j, _i, _o, s) => (j + 0.5) / s - 0.5,
  pytorch_half_pixel: (j, _i, o, s) => (o > 1 ? (j + 0.5) / s - 0.5 : 0),
  align_corners: (j, i, o) => (o === 1 ? 0 : (j * (i - 1)) / (o - 1)),
  asymmetric: (j, _i, _o, s) => j / s,
  tf_half_pixel_for_nn: (j, _i, _o, s) => (j + 0.5) / s,
};

type Round = (x: number, scale: number) => number;

const ROUND: Record<string, Round> = {
  round_prefer_floor: (x) => (x === Math.floor(x) + 0.5 ? Math.floor(x) : Math.round(x)),
  round_prefer_ceil: (x) => (x === Math.floor(x) + 0.5 ? Math.ceil(x) : Math.round(x)),
  floor: (x) => Math.floor(x),
  ceil: (x) => Math.ceil(x),
  // Resize-10 and Upsample, as ONNX Runtime runs them: truncation upsampling, ceiling downsampling
  simple: (x, scale) => (scale < 1 ? Math.ceil(x) : Math.floor(x)),
};

/** Cubic mode's two attributes (ONNX's defaults: a = -0.75, taps outside the axis kept). */
export interface Cubic {
  a: number;
  excludeOutside: boolean;
}

/**
 * Keys' cubic convolution weights of the four taps floor(x)-1 .. floor(x)+2 for a source
 * coordinate whose fraction is t; they sum to 1.
 */
function cubicWeights(t: number, a: number): [number, number, number, number] {
  const near = (d: number) => ((a + 2) * d - (a + 3)) * d * d + 1;          // |d| <= 1
  const far = (d: number) => ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;     // 1 < |d| < 2
  return [far(t + 1), near(t), near(1 - t), far(2 - t)];
}

/** The [nIn, nOut] interpolation matrix of one axis, row-major (MatMul's B). */
export function resizeMatrix(nIn: number, nOut: number, scale: number, mode: "nearest" | "linear" | "cubic", coord: Coord, round: Round, cubic: Cubic = { a: -0.75, excludeOutside: false }): Float32Array {
  const m = new Float32Array(nIn * nOut);
  const clamp = (i: number) => Math.min(Math.max(i, 0), nIn - 1);
  for (let j = 0; j < nOut; j++) {
    const x = coord(j, nIn, nOut, scale);
    if (mode === "nearest") {
      m[clamp(round(x, scale)) * nOut + j] = 1;
      continue;
    }
    if (mode === "cubic") {
      const x0 = Math.floor(x);
      const w = cubicWeights(x - x0, cubic.a);
      const taps = w.map((_, k) => x0 - 1 + k);
      const inside = (i: number) => i >= 0 && i < nIn;
      const sum = cubic.excludeOutside ? taps.reduce((s, i, k) => s + (inside(i) ? w[k]! : 0), 0) : 1;
      taps.forEach((i, k) => {
        if (cubic.excludeOutside && !inside(i)) return;
        m[clamp(i) * nOut + j]! += w[k]! / sum;
      });
      continue;
    }
    const xc = Math.min(Math.max(x, 0), nIn - 1);
    const i0 = Math.floor(xc), i1 = Math.min(i0 + 1, nIn - 1), f = xc - i0;
    m[i0 * nOut + j]! += 1 - f;
    m[i1 * nOut + j]! += f;
  }
  return m;
}

/** The constant at input i as numbers, or undefined when absent or empty (an unused scales/sizes slot). */
function constValues(c: OpCtx, i: number): number[] | undefined {
  if (!c.node.inputs[i]) return undefined;
  const w = c.weight(i);
  if (!w) throw shapeError(c, `input ${i} ("${c.node.inputs[i]}") is computed at run time; only constant scales and sizes are supported`);
  return w.data.length ? Array.from(w.data) : undefined;
}

/** What a Resize node does to a tensor of dims `x`: its output dims and each resized axis' matrix. */
export interface ResizeAxes {
  outDims: number[];
  /** Resized axis -> its [n_in, n_out] interpolation matrix (only the last two axes). */
  matrices: Map<number, Float32Array>;
}

/**
 * The resize node `n` makes of dims `x` (-k at the batch) with the given constant scales or
 * sizes, or the reason it is not supported. Shared by the lowering and fold.ts (BEiT resizes
 * its constant relative-position table).
 */
export function resizeAxes(n: Node, opset: number, x: number[], scalesIn: number[] | undefined, sizesIn: number[] | undefined): ResizeAxes | string {
  if (x.length < 3) return `X must be [N, C, ...spatial], found ${fmtShape(x)}`;
  const opset10 = n.opType === "Upsample" || opset < 11;
  const mode = attrString(n, "mode", "nearest");
  if (mode !== "nearest" && mode !== "linear" && mode !== "cubic") return `mode "${mode}" is not supported (nearest, linear and cubic are)`;
  const cubic = { a: attrFloat(n, "cubic_coeff_a", -0.75), excludeOutside: attrInt(n, "exclude_outside", 0) !== 0 };
  const coordName = opset10 ? "asymmetric" : attrString(n, "coordinate_transformation_mode", "half_pixel");
  const coord = COORDS[coordName];
  if (!coord) return `coordinate_transformation_mode "${coordName}" is not supported (${Object.keys(COORDS).join(", ")} are)`;
  const roundName = opset10 ? "simple" : attrString(n, "nearest_mode", "round_prefer_floor");
  const round = ROUND[roundName];
  if (!round) return `nearest_mode "${roundName}" is not supported`;
  if (attrInt(n, "antialias", 0) !== 0) return "antialias is not supported";
  if (attrString(n, "keep_aspect_ratio_policy", "stretch") !== "stretch") return "keep_aspect_ratio_policy other than stretch is not supported";
  // Opset 18's `axes`: the scales / sizes given for those axes only.
  const axes = attrInts(n, "axes")?.map((a) => (a < 0 ? a + x.length : a)) ?? x.map((_, i) => i);
  if (!scalesIn && !sizesIn) return "neither scales nor sizes is given";
  const given = (sizesIn ?? scalesIn)!;
  if (given.length !== axes.length) return `${sizesIn ? "sizes" : "scales"} has ${given.length} entries for ${axes.length} axes`;
  const outDims = [...x];
  const scales = x.map(() => 1);
  for (const [k, a] of axes.entries()) {
    if (x[a]! < 0) {  // the batch axis: sizes from the input's Shape (k·batch folds as k·SYM_BATCH) or a scale of 1
      const same = sizesIn ? sizesIn[k] === -x[a]! * SYM_BATCH : scalesIn![k] === 1;
      if (!same) return `the batch axis of ${fmtShape(x)} cannot be resized`;
      continue;
    }
    if (sizesIn) {
      outDims[a] = sizesIn[k]!;
      scales[a] = sizesIn[k]! / x[a]!;
    } else {
      scales[a] = scalesIn![k]!;
      outDims[a] = Math.floor(x[a]! * scalesIn![k]!);
    }
  }
  const resized = x.map((_, a) => a).filter((a) => x[a]! >= 0 && (outDims[a] !== x[a] || scales[a] !== 1));
  if (resized.some((a) => a < Math.max(2, x.length - 2))) {
    return `only the last two (spatial) axes may be resized: ${fmtShape(x)} -> [${outDims.map((d, i) => (x[i]! < 0 ? "N" : d))}]`;
  }
  if (outDims.some((d, a) => x[a]! >= 0 && !(d >= 1))) return `output shape [${outDims}] is empty`;
  const matrices = new Map(resized.map((a) => [a, resizeMatrix(x[a]!, outDims[a]!, scales[a]!, mode, coord, round, cubic)]));
  return { outDims, matrices };
}

export const Resize: Lowering = (c) => {
  const n = c.node;
  const x = floatAct(c, 0);
  const opset10 = n.opType === "Upsample" || c.opset < 11;
  const r = resizeAxes(n, c.opset, x, constValues(c, opset10 ? 1 : 2), opset10 ? undefined : constValues(c, 3));
  if (typeof r === "string") throw shapeError(c, r);
  const { outDims, matrices } = r;
  const matrix = (a: number): string => c.addConst(`${n.name}.resize${a}`, { isFloat: true, dims: [x[a]!, outDims[a]!], data: matrices.get(a)! });
  const last = x.length - 1, row = x.length - 2;
  const doRow = matrices.has(row), doCol = matrices.has(last);
  const swap = x.map((_, i) => (i === row ? last : i === last ? row : i));
  const ops: NonNullable<Lowered["chain"]> = [];
  let shape = [...x];
  if (doCol) {
    shape = [...shape.slice(0, -1), outDims[last]!];
    ops.push({ op: "MatMul", attrs: {}, shape, inputs: [matrix(last)] });
  }
  if (doRow) {
    shape = swap.map((p) => shape[p]!);
    ops.push({ op: "Transpose", attrs: { perm: swap }, shape });
    shape = [...shape.slice(0, -1), outDims[row]!];
    ops.push({ op: "MatMul", attrs: {}, shape, inputs: [matrix(row)] });
    shape = swap.map((p) => shape[p]!);
    ops.push({ op: "Transpose", attrs: { perm: swap }, shape });
  }
  if (ops.length === 0) {  // nothing resized: a copy
    return { op: "Reshape", shapes: [x], inputs: [n.inputs[0]!], attrs: { shape: x } };
  }
  const [first, ...rest] = ops;
  return {
    op: first!.op,
    shapes: [first!.shape],
    attrs: first!.attrs,
    inputs: [n.inputs[0]!, ...(first!.inputs ?? [])],
    ...(rest.length ? { chain: rest } : {}),
  };
};
