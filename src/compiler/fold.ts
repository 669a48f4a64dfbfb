/**
 * Constant folding: evaluate a node whose inputs are all constants. Covers the shape
 * arithmetic exporters emit (Shape/Gather/Unsqueeze/Concat/Cast/Slice...) and elementwise
 * math on weights. Returns undefined when the op has no evaluator here.
 */
import { attrFloat, attrInt, attrInts, attrTensor, normAxis } from "./attrs.ts";
import { activationFn } from "./ops-activation.ts";
import { BINARY, UNARY, binary, broadcastDims, broadcastIndex, mk, mod, unary } from "./fold-math.ts";
import { dtypeOfOnnx } from "./graph-inputs.ts";
import { parseEquation } from "./ops-einsum.ts";
import { splitSizes } from "./ops-cnn.ts";
import { resizeAxes } from "./ops-resize.ts";
import { fileQuantType, isFloatType, onnxTypeOfQuant, quantRange, quantTypeOfOnnx } from "./tensor-data.ts";
import { type ConstTensor, type Node, defaultDtype, numel } from "./ir.ts";

type C = ConstTensor;

function ints(t: C | undefined): number[] | undefined {
  return t ? Array.from(t.data) : undefined;
}

/** Strides of a row-major shape. */
function strides(dims: readonly number[]): number[] {
  const s = new Array<number>(dims.length).fill(1);
  for (let i = dims.length - 2; i >= 0; i--) s[i] = s[i + 1]! * dims[i + 1]!;
  return s;
}

/** Gather along one axis with arbitrary index lists per axis (used by Gather, Slice, Transpose-free copies). */
function select(t: C, picks: number[][]): C {
  const dims = picks.map((p) => p.length);
  const st = strides(t.dims);
  const out: number[] = [];
  const coord = new Array<number>(dims.length).fill(0);
  const n = numel(dims);
  for (let k = 0; k < n; k++) {
    let f = 0;
    for (let i = 0; i < dims.length; i++) f += picks[i]![coord[i]!]! * st[i]!;
    out.push(t.data[f]!);
    for (let i = dims.length - 1; i >= 0; i--) {
      if (++coord[i]! < dims[i]!) break;
      coord[i] = 0;
    }
  }
  return mk(t.isFloat, dims, out);
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

export function transposeConst(t: C, perm: number[]): C {
  const dims = perm.map((p) => t.dims[p]!);
  const st = strides(t.dims);
  const out: number[] = [];
  const coord = new Array<number>(dims.length).fill(0);
  for (let k = 0; k < numel(dims); k++) {
    let f = 0;
    for (let i = 0; i < dims.length; i++) f += coord[i]! * st[perm[i]!]!;
    out.push(t.data[f]!);
    for (let i = dims.length - 1; i >= 0; i--) {
      if (++coord[i]! < dims[i]!) break;
      coord[i] = 0;
    }
  }
  return mk(t.isFloat, dims, out);
}

/** Reshape target with ONNX semantics (0 copies unless allowzero, one -1 inferred). */
function reshapeDims(from: number[], target: number[], allowZero: boolean): number[] {
  const dims = target.map((d, i) => (d === 0 && !allowZero ? from[i]! : d));
  const known = dims.filter((d) => d !== -1).reduce((a, b) => a * b, 1);
  return dims.map((d) => (d === -1 ? numel(from) / known : d));
}

export function foldNode(n: Node, ins: (C | undefined)[], opset: number): C[] | undefined {
  const x = ins[0];
  const op = n.opType;
  if (op in BINARY && x && ins[1]) {
    const r = binary(x, ins[1], (a, b) => BINARY[op]!(a, b, x.isFloat));
    return r && [r];
  }
  if (op === "Not" && x) return [{ ...unary(x, UNARY[op]!), dtype: "bool" }];
  if (op in UNARY && x) return [unary(x, UNARY[op]!)];
  const activation = x && activationFn(n);
  if (activation) return [unary(x, activation)];
  switch (op) {
    case "Constant": {
      const t = attrTensor(n, "value");
      if (t) return [t];
      const f = n.attrs.get("value_float") ?? n.attrs.get("value_floats");
      if (f !== undefined) return [mk(true, Array.isArray(f) ? [f.length] : [], Array.isArray(f) ? (f as number[]) : [f as number])];
      const i = n.attrs.get("value_int") ?? n.attrs.get("value_ints");
      if (i !== undefined) return [mk(false, Array.isArray(i) ? [i.length] : [], Array.isArray(i) ? (i as number[]) : [i as number])];
      return undefined;
    }
    case "Identity":
      return x && [x];
    case "Cast":
    case "CastLike": {
      if (!x) return undefined;
      const toFloat = op === "Cast" ? isFloatType(attrInt(n, "to", 1)) : (ins[1]?.isFloat ?? true);
      const dtype = op === "Cast" ? dtypeOfOnnx(attrInt(n, "to", 1)) : ins[1]?.dtype;
      const data = dtype === "bool" ? Array.from(x.data, (v) => +(v !== 0)) : toFloat ? x.data : Array.from(x.data, Math.trunc);
      return [{ ...mk(toFloat, [...x.dims], data), ...(dtype ? { dtype } : {}) }];
    }
    case "Shape": {
      if (!x) return undefined;
      const r = x.dims.length;
      const s = normClamp(attrInt(n, "start", 0), r), e = normClamp(attrInt(n, "end", r), r);
      return [mk(false, [Math.max(0, e - s)], x.dims.slice(s, e))];
    }
    case "Size":
      return x && [mk(false, [], [numel(x.dims)])];
    case "Gather": {
      if (!x || !ins[1]) return undefined;
      const axis = normAxis(n, attrInt(n, "axis", 0), x.dims.length);
      const idx = Array.from(ins[1].data, (v) => (v < 0 ? v + x.dims[axis]! : v));
      const picks = x.dims.map((d, i) => (i === axis ? idx : range(d)));
      const g = select(x, picks);
      const dims = [...x.dims.slice(0, axis), ...ins[1].dims, ...x.dims.slice(axis + 1)];
      return [{ ...g, dims }];
    }
    case "Unsqueeze": {
      if (!x) return undefined;
      const axes = opset >= 13 ? ints(ins[1]) : attrInts(n, "axes");
      if (!axes) return undefined;
      const r = x.dims.length + axes.length;
      const norm = axes.map((a) => (a < 0 ? a + r : a)).sort((a, b) => a - b);
      const dims = [...x.dims];
      for (const a of norm) dims.splice(a, 0, 1);
      return [{ ...x, dims }];
    }
    case "Squeeze": {
      if (!x) return undefined;
      const axes = (opset >= 13 ? ints(ins[1]) : attrInts(n, "axes"))?.map((a) => (a < 0 ? a + x.dims.length : a));
      return [{ ...x, dims: x.dims.filter((d, i) => (axes ? !axes.includes(i) : d !== 1)) }];
    }
    case "Concat": {
      if (ins.some((t) => !t)) return undefined;
      const ts = ins as C[];
      const axis = normAxis(n, attrInt(n, "axis", 0), ts[0]!.dims.length);
      const outer = numel(ts[0]!.dims.slice(0, axis));
      const out: number[] = [];
      for (let o = 0; o < outer; o++) {
        for (const t of ts) {
          const chunk = numel(t.dims.slice(axis));
          for (let k = 0; k < chunk; k++) out.push(t.data[o * chunk + k]!);
        }
      }
      const dims = [...ts[0]!.dims];
      dims[axis] = ts.reduce((a, t) => a + t.dims[axis]!, 0);
      return [mk(ts[0]!.isFloat, dims, out)];
    }
    case "Reshape": {
      const target = ints(ins[1]);
      if (!x || !target) return undefined;
      return [{ ...x, dims: reshapeDims(x.dims, target, attrInt(n, "allowzero", 0) === 1) }];
    }
    case "Flatten": {
      if (!x) return undefined;
      const a = attrInt(n, "axis", 1);
      const axis = a < 0 ? a + x.dims.length : a;
      return [{ ...x, dims: [numel(x.dims.slice(0, axis)), numel(x.dims.slice(axis))] }];
    }
    case "Transpose":
      return x && [transposeConst(x, attrInts(n, "perm", range(x.dims.length).reverse()))];
    case "Slice":
      return x && sliceConst(n, x, ins, opset);
    case "Split": {
      if (!x || x.dims.length === 0) return undefined;
      const axis = normAxis(n, attrInt(n, "axis", 0), x.dims.length);
      const sizes = splitSizes(n, opset >= 13 ? ints(ins[1]) : attrInts(n, "split"), x.dims[axis]!);
      if (typeof sizes === "string") return undefined;
      let start = 0;
      return sizes.map((size) => {
        const picks = x.dims.map((d, i) => (i === axis ? range(size).map((k) => start + k) : range(d)));
        start += size;
        return select(x, picks);
      });
    }
    case "ConstantOfShape": {
      const shape = ints(x);
      // A shape holding the batch (NaN) has no compile-time value.
      if (!shape || shape.some(Number.isNaN)) return undefined;
      const v = attrTensor(n, "value") ?? mk(true, [1], [0]);
      return [mk(v.isFloat, shape, new Array(numel(shape)).fill(v.data[0] ?? 0))];
    }
    case "OneHot": {  // CANINE's hash buckets over constant ids
      const [depthT, values] = [ins[1], ins[2]];
      const depth = depthT?.data[0];
      if (!x || !values || depth === undefined || !(depth > 0) || values.data.length !== 2) return undefined;
      const axis = normAxis(n, attrInt(n, "axis", -1), x.dims.length + 1);
      const dims = [...x.dims.slice(0, axis), depth, ...x.dims.slice(axis)];
      const inner = numel(x.dims.slice(axis));
      const [off, on] = [values.data[0]!, values.data[1]!];
      const out = range(numel(dims)).map((at) => {
        const outer = Math.floor(at / (depth * inner)), k = Math.floor(at / inner) % depth, i = at % inner;
        const id = x.data[outer * inner + i]!;
        return (id < 0 ? id + depth : id) === k ? on : off;
      });
      const made = mk(values.isFloat, dims, out);
      return [values.dtype ? { ...made, dtype: values.dtype } : made];
    }
    case "EyeLike": {  // XLNet's identity mask over its constant sequence length
      if (!x || x.dims.length !== 2) return undefined;
      const [rows, cols] = x.dims as [number, number];
      const k = attrInt(n, "k", 0);
      const named = attrInt(n, "dtype", 0);
      const dtype = named ? dtypeOfOnnx(named) : x.dtype;
      const out = mk(named ? isFloatType(named) : x.isFloat, [rows, cols], range(rows * cols).map((at) => +((at % cols) - Math.floor(at / cols) === k)));
      return [dtype ? { ...out, dtype } : out];
    }
    case "Trilu": {  // a decoder's causal mask: torch.triu over a square of its constant lengths
      if (!x || x.dims.length < 2) return undefined;
      const k = ins[1] ? ins[1].data[0] : 0;
      if (k === undefined || Number.isNaN(k)) return undefined;
      const upper = attrInt(n, "upper", 1) !== 0;
      const [rows, cols] = x.dims.slice(-2) as [number, number];
      const keep = (at: number): boolean => {
        const j = at % cols, i = Math.floor(at / cols) % rows;
        return upper ? j - i >= k : j - i <= k;
      };
      return [{ ...x, ...mk(x.isFloat, [...x.dims], Array.from(x.data, (v, at) => (keep(at) ? v : 0))) }];
    }
    case "Range": {
      const [s, l, d] = [ins[0]?.data[0], ins[1]?.data[0], ins[2]?.data[0]];
      if (s === undefined || l === undefined || d === undefined) return undefined;
      const count = Math.max(Math.ceil((l - s) / d), 0);
      return [mk(x!.isFloat, [count], range(count).map((i) => s + i * d))];
    }
    case "Equal":
    case "Less":
    case "Greater":
    case "LessOrEqual":
    case "GreaterOrEqual":
    case "And":
    case "Or": {
      if (!x || !ins[1]) return undefined;
      const f = {
        Equal: (a: number, b: number) => +(a === b), Less: (a: number, b: number) => +(a < b),
        Greater: (a: number, b: number) => +(a > b), LessOrEqual: (a: number, b: number) => +(a <= b),
        GreaterOrEqual: (a: number, b: number) => +(a >= b), And: (a: number, b: number) => +(!!a && !!b), Or: (a: number, b: number) => +(!!a || !!b),
      }[op]!;
      const r = binary(x, ins[1], f, false);
      return r && [{ ...r, dtype: "bool" }];
    }
    case "Mod": {
      if (!x || !ins[1]) return undefined;
      const fm = attrInt(n, "fmod", 0) === 1;
      const r = binary(x, ins[1], (a, b) => mod(a, b, fm));
      return r && [r];
    }
    case "Where": {
      const [c, a, b] = ins;
      if (!c || !a || !b) return undefined;
      const dims = broadcastDims(broadcastDims(c.dims, a.dims) ?? [], b.dims);
      if (!dims) return undefined;
      const [ic, ia, ib] = [c, a, b].map((t) => broadcastIndex(t.dims, dims));
      return [{ ...mk(a.isFloat, dims, range(numel(dims)).map((k) => (c.data[ic![k]!] ? a.data[ia![k]!]! : b.data[ib![k]!]!))), dtype: defaultDtype(a) }];
    }
    case "Expand": {
      const shape = ints(ins[1]);
      if (!x || !shape) return undefined;
      const dims = broadcastDims(x.dims, shape);
      if (!dims) return undefined;
      const ix = broadcastIndex(x.dims, dims);
      return [mk(x.isFloat, dims, Array.from(ix, (i) => x.data[i]!))];
    }
    case "Tile": {
      const reps = ints(ins[1]);
      if (!x || !reps || reps.length !== x.dims.length || reps.some((r) => r < 0)) return undefined;
      const dims = x.dims.map((d, i) => d * reps[i]!);
      const src = strides(x.dims), dst = strides(dims);
      // Output element k reads x at (k's index on each axis) mod that axis' extent.
      return [mk(x.isFloat, dims, range(numel(dims)).map((k) => x.data[dims.reduce((at, _, i) => at + (Math.floor(k / dst[i]!) % dims[i]! % x.dims[i]!) * src[i]!, 0)]!))];
    }
    case "Resize":
    case "Upsample": {
      if (!x || !x.isFloat) return undefined;
      const opset10 = n.opType === "Upsample" || opset < 11;
      const values = (t: C | undefined) => (t && t.data.length ? Array.from(t.data) : undefined);
      const r = resizeAxes(n, opset, x.dims, values(ins[opset10 ? 1 : 2]), opset10 ? undefined : values(ins[3]));
      if (typeof r === "string") return undefined;
      let t = x;
      for (const [axis, m] of r.matrices) t = alongAxis(t, axis, m, r.outDims[axis]!);
      return [{ ...t, dtype: defaultDtype(x) }];
    }
    case "Clip": {  // constant bounds: inputs (opset 11+) or attributes; an absent one is no bound
      if (!x) return undefined;
      const lo = opset >= 11 ? ins[1]?.data[0] : attrFloat(n, "min", -Infinity);
      const hi = opset >= 11 ? ins[2]?.data[0] : attrFloat(n, "max", Infinity);
      return [unary(x, (v) => Math.min(Math.max(v, lo ?? -Infinity), hi ?? Infinity))];
    }
    case "MatMul":
      return x && ins[1] ? matmulConst(x, ins[1]) : undefined;
    case "LayerNormalization":
      return x && x.isFloat && ins[1] ? layerNormConst(n, x, ins[1], ins[2]) : undefined;
    case "BatchNormalization":
      return x && x.isFloat && ins.slice(1, 5).every(Boolean) ? batchNormConst(n, x, ins.slice(1, 5) as C[], opset) : undefined;
    case "ScatterND":
      return x && ins[1] && ins[2] ? scatterNdConst(n, x, ins[1], ins[2]) : undefined;
    case "ReduceSum":
    case "ReduceMean":
    case "ReduceMax":
    case "ReduceMin":
    case "ReduceL2":
    case "ReduceSumSquare":
    case "ReduceL1":
      return x ? reduceConst(n, x, ins[1], opset) : undefined;
    case "GatherND":
      return x && ins[1] ? gatherNdConst(n, x, ins[1]) : undefined;
    case "Pad":
      return x ? padConst(n, x, ins, opset) : undefined;
    case "Einsum":
      return ins.length > 0 && ins.every(Boolean) ? einsumConst(n, ins as C[]) : undefined;
    case "GatherElements":
    case "ScatterElements":
      return x && ins[1] ? elementsConst(n, x, ins[1], ins[2]) : undefined;
    case "DequantizeLinear":
      return x && ins[1] ? dequantizeConst(n, x, ins[1], ins[2]) : undefined;
    case "QuantizeLinear":
      return x && ins[1] ? quantizeConst(n, x, ins[1], ins[2]) : undefined;
    default:
      return undefined;
  }
}

/**
 * For each element of x, the index of its quantization parameters (scale, zero point): 0 per
 * tensor, its slice of `axis` (default 1) per axis; undefined where the scale fits neither, or
 * for opset 21's blocked quantization, which is not evaluated.
 */
function quantParamIndex(n: Node, x: C, scale: C): ((k: number) => number) | undefined {
  if (attrInt(n, "block_size", 0) > 0) return undefined;
  if (scale.data.length <= 1) return () => 0;
  const axis = normAxis(n, attrInt(n, "axis", 1), x.dims.length);
  if (x.dims[axis] !== scale.data.length) return undefined;
  const inner = numel(x.dims.slice(axis + 1));
  return (k) => Math.floor(k / inner) % scale.data.length;
}

/**
 * DequantizeLinear of a constant, (x - zero_point) * scale: a quantized model's weights and
 * biases (a QDQ export's Conv reads its kernel through one).
 */
function dequantizeConst(n: Node, x: C, scale: C, zeroPoint: C | undefined): C[] | undefined {
  const param = quantParamIndex(n, x, scale);
  if (!param) return undefined;
  const out = new Float32Array(x.data.length);
  for (let k = 0; k < out.length; k++) out[k] = (x.data[k]! - (zeroPoint?.data[param(k)] ?? 0)) * scale.data[param(k)]!;
  return [{ isFloat: true, dims: [...x.dims], data: out }];
}

/**
 * QuantizeLinear of a constant, saturate(round(x / scale) + zero_point), rounding half to even,
 * into the zero point's integer type (uint8 without one): a QDQ export's quantized position
 * embeddings, re-quantized before their Gather.
 */
function quantizeConst(n: Node, x: C, scale: C, zeroPoint: C | undefined): C[] | undefined {
  const param = quantParamIndex(n, x, scale);
  if (!param) return undefined;
  const type = quantTypeOfOnnx(attrInt(n, "output_dtype", 0)) ?? (zeroPoint && fileQuantType(zeroPoint)) ?? "uint8";
  const [lo, hi] = quantRange(type);
  const out = new Float64Array(x.data.length);
  for (let k = 0; k < out.length; k++) {
    const v = x.data[k]! / scale.data[param(k)]!;
    const r = Math.abs(v % 1) === 0.5 ? 2 * Math.round(v / 2) : Math.round(v);
    out[k] = Math.min(hi, Math.max(lo, r + (zeroPoint?.data[param(k)] ?? 0)));
  }
  return [{ isFloat: false, dims: [...x.dims], data: out, dtype: type, fileType: onnxTypeOfQuant(type) }];
}

/** A Reduce* of a constant (BEiT sums its resized relative-position table), axes from the input or attribute. */
function reduceConst(n: Node, x: C, axesIn: C | undefined, opset: number): C[] | undefined {
  const fromInput = opset >= (n.opType === "ReduceSum" ? 13 : 18);
  // ReduceL2 / ReduceSumSquare / ReduceL1 (wav2vec2's weight norm, dynamo) sum squares or magnitudes.
  const term = n.opType === "ReduceL1" ? Math.abs : n.opType === "ReduceL2" || n.opType === "ReduceSumSquare" ? (v: number) => v * v : (v: number) => v;
  const raw = fromInput ? (axesIn ? Array.from(axesIn.data) : undefined) : attrInts(n, "axes");
  const r = x.dims.length;
  let axes = raw?.map((a) => (a < 0 ? a + r : a));
  if (!axes || axes.length === 0) {
    if (attrInt(n, "noop_with_empty_axes", 0)) return [x];
    axes = x.dims.map((_, i) => i);
  }
  if (axes.some((a) => a < 0 || a >= r)) return undefined;
  const keep = attrInt(n, "keepdims", 1) === 1;
  const kept = x.dims.map((d, i) => (axes!.includes(i) ? 1 : d));
  const st = strides(x.dims), ost = strides(kept);
  const count = numel(x.dims) / numel(kept);
  const init = n.opType === "ReduceMax" ? -Infinity : n.opType === "ReduceMin" ? Infinity : 0;
  const acc = new Array<number>(numel(kept)).fill(init);
  for (let k = 0; k < x.data.length; k++) {
    let o = 0;
    for (let i = 0; i < r; i++) if (!axes.includes(i)) o += (Math.floor(k / st[i]!) % x.dims[i]!) * ost[i]!;
    const v = term(x.data[k]!);
    acc[o] = n.opType === "ReduceMax" ? Math.max(acc[o]!, v) : n.opType === "ReduceMin" ? Math.min(acc[o]!, v) : acc[o]! + v;
  }
  const out = n.opType === "ReduceMean" ? acc.map((v) => v / count) : n.opType === "ReduceL2" ? acc.map(Math.sqrt) : acc;
  const dims = keep ? kept : x.dims.filter((_, i) => !axes!.includes(i));
  return [{ ...mk(x.isFloat, dims, out), dtype: defaultDtype(x) }];
}

/**
 * LayerNormalization of a constant (DeBERTa-v3 normalises its relative-position table once):
 * over the axes from `axis` on, in double precision, rounded once into float32; only the Y output.
 */
function layerNormConst(n: Node, x: C, scale: C, bias: C | undefined): C[] | undefined {
  if (n.outputs.length > 1 && n.outputs.slice(1).some(Boolean)) return undefined;
  const axis = normAxis(n, attrInt(n, "axis", -1), x.dims.length);
  const eps = attrFloat(n, "epsilon", 1e-5);
  const inner = numel(x.dims.slice(axis));
  const normed = x.dims.slice(axis);
  const fits = (t: C) => broadcastDims(t.dims, normed)?.join() === normed.join();
  if (!fits(scale) || (bias && !fits(bias))) return undefined;
  const ix = broadcastIndex(scale.dims, normed);
  const ib = bias && broadcastIndex(bias.dims, normed);
  const out = new Float32Array(x.data.length);
  for (let o = 0; o < x.data.length; o += inner) {
    let mean = 0, sq = 0;
    for (let j = 0; j < inner; j++) mean += x.data[o + j]!;
    mean /= inner;
    for (let j = 0; j < inner; j++) sq += (x.data[o + j]! - mean) ** 2;
    const inv = 1 / Math.sqrt(sq / inner + eps);
    for (let j = 0; j < inner; j++) out[o + j] = (x.data[o + j]! - mean) * inv * scale.data[ix[j]!]! + (bias ? bias.data[ib![j]!]! : 0);
  }
  return [{ ...mk(true, [...x.dims], out), dtype: defaultDtype(x) }];
}

/**
 * BatchNormalization of a constant: BiT's weight-standardised convs normalise each filter
 * with `batch_norm(weight, training=True)`, which exports as a training-mode BatchNormalization
 * of the weight. Training mode (opset 14+) uses the statistics of x itself over every axis but
 * the channel (population variance) and also yields the running mean and variance, blended with
 * the given ones by `momentum`; inference mode uses the given mean and variance. Double
 * precision, rounded once into float32.
 */
function batchNormConst(n: Node, x: C, [scale, bias, mean, variance]: C[], opset: number): C[] | undefined {
  const channels = x.dims[1] ?? 1;
  const perChannel = (t: C) => t.data.length === channels;
  if (![scale, bias, mean, variance].every((t) => perChannel(t!))) return undefined;
  const training = opset >= 14 && attrInt(n, "training_mode", 0) === 1;
  if (!training && n.outputs.slice(1).some(Boolean)) return undefined;
  const eps = attrFloat(n, "epsilon", 1e-5);
  const momentum = attrFloat(n, "momentum", 0.9);
  const inner = numel(x.dims.slice(2)), outer = x.dims[0] ?? 1;
  const useMean = new Float64Array(channels), useVar = new Float64Array(channels);
  for (let c = 0; c < channels; c++) {
    if (!training) {
      useMean[c] = mean!.data[c]!;
      useVar[c] = variance!.data[c]!;
      continue;
    }
    let sum = 0, sq = 0;
    for (let o = 0; o < outer; o++) for (let j = 0, b = (o * channels + c) * inner; j < inner; j++) sum += x.data[b + j]!;
    const m = sum / (outer * inner);
    for (let o = 0; o < outer; o++) for (let j = 0, b = (o * channels + c) * inner; j < inner; j++) sq += (x.data[b + j]! - m) ** 2;
    useMean[c] = m;
    useVar[c] = sq / (outer * inner);
  }
  const out = new Float32Array(x.data.length);
  for (let o = 0; o < outer; o++) {
    for (let c = 0; c < channels; c++) {
      const k = scale!.data[c]! / Math.sqrt(useVar[c]! + eps), b0 = (o * channels + c) * inner;
      for (let j = 0; j < inner; j++) out[b0 + j] = (x.data[b0 + j]! - useMean[c]!) * k + bias!.data[c]!;
    }
  }
  const y = { ...mk(true, [...x.dims], out), dtype: defaultDtype(x) };
  if (!training) return [y];
  const blend = (given: C, batch: Float64Array) => mk(true, [channels], Array.from(batch, (v, c) => given.data[c]! * momentum + v * (1 - momentum)));
  return [y, blend(mean!, useMean), blend(variance!, useVar)];
}

/** t with axis `axis` (extent n_in) multiplied by the [n_in, nOut] matrix m: a constant Resize's one axis. */
function alongAxis(t: C, axis: number, m: Float32Array, nOut: number): C {
  const nIn = t.dims[axis]!, inner = numel(t.dims.slice(axis + 1)), outer = numel(t.dims.slice(0, axis));
  const out = new Float32Array(outer * nOut * inner);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < nIn; i++) {
      for (let j = 0; j < nOut; j++) {
        const w = m[i * nOut + j]!;
        if (w === 0) continue;
        const src = (o * nIn + i) * inner, dst = (o * nOut + j) * inner;
        for (let k = 0; k < inner; k++) out[dst + k]! += w * t.data[src + k]!;
      }
    }
  }
  const dims = [...t.dims];
  dims[axis] = nOut;
  return { isFloat: true, dims, data: out };
}

/** numpy matmul of two constants: 1-D operands promoted, leading (batch) dims broadcast. */
function matmulConst(a0: C, b0: C): C[] | undefined {
  const a = a0.dims.length === 1 ? { ...a0, dims: [1, a0.dims[0]!] } : a0;
  const b = b0.dims.length === 1 ? { ...b0, dims: [b0.dims[0]!, 1] } : b0;
  const [m, k] = a.dims.slice(-2) as [number, number];
  const [k2, nn] = b.dims.slice(-2) as [number, number];
  if (k !== k2) return undefined;
  const batch = broadcastDims(a.dims.slice(0, -2), b.dims.slice(0, -2));
  if (!batch || numel(batch) * m * k * nn > 5e7) return undefined;  // (a product that large is no shape arithmetic: refused, not computed for minutes)
  const ia = broadcastIndex(a.dims.slice(0, -2), batch), ib = broadcastIndex(b.dims.slice(0, -2), batch);
  const out = new Array<number>(ia.length * m * nn).fill(0);
  for (let s = 0; s < ia.length; s++) {
    const ao = ia[s]! * m * k, bo = ib[s]! * k * nn, oo = s * m * nn;
    for (let i = 0; i < m; i++)
      for (let p = 0; p < k; p++) {
        const av = a.data[ao + i * k + p]!;
        for (let j = 0; j < nn; j++) out[oo + i * nn + j]! += av * b.data[bo + p * nn + j]!;
      }
  }
  let dims = [...batch, m, nn];
  if (a0.dims.length === 1) dims = dims.filter((_, i) => i !== dims.length - 2);
  if (b0.dims.length === 1) dims = dims.slice(0, -1);
  return [{ ...mk(a0.isFloat, dims, out), dtype: defaultDtype(a0) }];
}

/** ScatterND (reduction none): data with the slices that indices [..., k] name replaced by updates'. */
/**
 * Einsum of constants (Funnel's relative-position projections): every combination of the
 * labels, summed into the output's; refused (undefined) past 5·10⁷ terms, like a constant MatMul.
 */
function einsumConst(n: Node, ops: C[]): C[] | undefined {
  const eq = n.attrs.get("equation");
  const parsed = typeof eq === "string" ? parseEquation(eq, ops.map((t) => t.dims.length)) : "no equation";
  if (typeof parsed === "string") return undefined;
  const extent = new Map<string, number>();
  for (const [i, labels] of parsed.terms.entries()) {
    for (const [a, l] of labels.entries()) {
      const d = ops[i]!.dims[a]!, e = extent.get(l);
      if (e !== undefined && e !== d && e !== 1 && d !== 1) return undefined;
      extent.set(l, Math.max(e ?? 1, d));
    }
  }
  const all = [...parsed.out, ...[...extent.keys()].filter((l) => !parsed.out.includes(l))];
  const dimsOf = all.map((l) => extent.get(l)!);
  const total = numel(dimsOf);
  if (total > 5e7) return undefined;
  const outSize = numel(parsed.out.map((l) => extent.get(l)!));
  const acc = new Float64Array(outSize);
  // Each operand's stride for each label (0 where it broadcasts or lacks the label).
  const st = ops.map((t, i) => {
    const s = strides(t.dims);
    return all.map((l) => { const a = parsed.terms[i]!.indexOf(l); return a >= 0 && t.dims[a]! > 1 ? s[a]! : 0; });
  });
  const idx = new Array<number>(all.length).fill(0);
  for (let k = 0; k < total; k++) {
    let rem = k;
    for (let j = all.length - 1; j >= 0; j--) { idx[j] = rem % dimsOf[j]!; rem = Math.floor(rem / dimsOf[j]!); }
    let v = 1;
    for (let i = 0; i < ops.length; i++) v *= ops[i]!.data[idx.reduce((o, c, j) => o + c * st[i]![j]!, 0)]!;
    acc[Math.floor(k / (total / outSize))]! += v;
  }
  return [{ ...mk(ops[0]!.isFloat, parsed.out.map((l) => extent.get(l)!), acc), dtype: defaultDtype(ops[0]!) }];
}

/** Pad of a constant, constant mode (Funnel's relative-position tables): pads may be negative (crop). */
function padConst(n: Node, x: C, ins: (C | undefined)[], opset: number): C[] | undefined {
  const mode = n.attrs.get("mode") ?? "constant";
  if (mode !== "constant") return undefined;
  const r = x.dims.length;
  const raw = opset >= 11 ? (ins[1] ? Array.from(ins[1].data) : undefined) : attrInts(n, "pads");
  const value = opset >= 11 ? (ins[2]?.data[0] ?? 0) : attrFloat(n, "value", 0);
  const axes = (opset >= 18 && ins[3] ? Array.from(ins[3].data) : x.dims.map((_, i) => i)).map((a) => (a < 0 ? a + r : a));
  if (!raw || raw.length !== 2 * axes.length) return undefined;
  const begin = new Array<number>(r).fill(0), end = new Array<number>(r).fill(0);
  axes.forEach((a, i) => { begin[a] = raw[i]!; end[a] = raw[axes.length + i]!; });
  const dims = x.dims.map((d, i) => d + begin[i]! + end[i]!);
  if (dims.some((d) => d < 0)) return undefined;
  const os = strides(dims), is = strides(x.dims);
  const out = range(numel(dims)).map((k) => {
    let off = 0;
    for (let i = 0; i < r; i++) {
      const c = (Math.floor(k / os[i]!) % dims[i]!) - begin[i]!;
      if (c < 0 || c >= x.dims[i]!) return value;
      off += c * is[i]!;
    }
    return x.data[off]!;
  });
  return [{ ...mk(x.isFloat, dims, out), dtype: defaultDtype(x) }];
}

/** GatherND (batch_dims 0) of constants: each index tuple picks a slice of the data's first axes. */
function gatherNdConst(n: Node, data: C, indices: C): C[] | undefined {
  if ((n.attrs.get("batch_dims") ?? 0) !== 0) return undefined;
  const k = indices.dims.at(-1)!;
  if (!(k >= 1 && k <= data.dims.length)) return undefined;
  const st = strides(data.dims), slice = numel(data.dims.slice(k)), count = numel(indices.dims.slice(0, -1));
  const out: number[] = [];
  for (let u = 0; u < count; u++) {
    let off = 0;
    for (let i = 0; i < k; i++) {
      const d = data.dims[i]!, v = indices.data[u * k + i]!, idx = v < 0 ? v + d : v;
      if (!(idx >= 0 && idx < d)) return undefined;
      off += idx * st[i]!;
    }
    for (let e = 0; e < slice; e++) out.push(data.data[off + e]!);
  }
  return [{ ...mk(data.isFloat, [...indices.dims.slice(0, -1), ...data.dims.slice(k)], out), dtype: defaultDtype(data) }];
}

/**
 * GatherElements and ScatterElements (reduction none) of constants along `axis`: element i of
 * the indices names the position on that axis (Funnel's relative positions, BEiT's dynamo
 * relative-position index).
 */
function elementsConst(n: Node, data: C, indices: C, updates: C | undefined): C[] | undefined {
  const scatter = n.opType === "ScatterElements";
  if (scatter && (!updates || (n.attrs.get("reduction") ?? "none") !== "none" || updates.data.length !== indices.data.length)) return undefined;
  const r = data.dims.length;
  if (indices.dims.length !== r) return undefined;
  const axis = normAxis(n, attrInt(n, "axis", 0), r);
  const ds = strides(data.dims), is = strides(indices.dims);
  const out = scatter ? Array.from(data.data) : new Array<number>(indices.data.length);
  for (let k = 0; k < indices.data.length; k++) {
    let off = 0;
    for (let i = 0; i < r; i++) {
      let c = Math.floor(k / is[i]!) % indices.dims[i]!;
      if (i === axis) {
        const v = indices.data[k]!;
        c = v < 0 ? v + data.dims[i]! : v;
        if (!(c >= 0 && c < data.dims[i]!)) return undefined;
      } else if (c >= data.dims[i]!) return undefined;
      off += c * ds[i]!;
    }
    if (scatter) out[off] = updates!.data[k]!;
    else out[k] = data.data[off]!;
  }
  return [{ ...mk(data.isFloat, scatter ? [...data.dims] : [...indices.dims], out), dtype: defaultDtype(data) }];
}

function scatterNdConst(n: Node, data: C, indices: C, updates: C): C[] | undefined {
  const reduction = n.attrs.get("reduction") ?? "none";
  if (reduction !== "none") return undefined;
  const k = indices.dims.at(-1)!;
  if (!(k >= 1 && k <= data.dims.length)) return undefined;
  const st = strides(data.dims);
  const slice = numel(data.dims.slice(k));
  const out = Array.from(data.data);
  const count = numel(indices.dims.slice(0, -1));
  if (updates.data.length !== count * slice) return undefined;
  for (let u = 0; u < count; u++) {
    let off = 0;
    for (let i = 0; i < k; i++) {
      const d = data.dims[i]!;
      const v = indices.data[u * k + i]!;
      const idx = v < 0 ? v + d : v;
      if (!(idx >= 0 && idx < d)) return undefined;
      off += idx * st[i]!;
    }
    for (let e = 0; e < slice; e++) out[off + e] = updates.data[u * slice + e]!;
  }
  return [{ ...mk(data.isFloat, [...data.dims], out), dtype: defaultDtype(data) }];
}

function normClamp(v: number, r: number): number {
  return Math.min(Math.max(v < 0 ? v + r : v, 0), r);
}

function sliceConst(n: Node, x: C, ins: (C | undefined)[], opset: number): C[] | undefined {
  const r = x.dims.length;
  const starts = opset >= 10 ? ints(ins[1]) : attrInts(n, "starts");
  const ends = opset >= 10 ? ints(ins[2]) : attrInts(n, "ends");
  if (!starts || !ends) return undefined;
  const axes = (opset >= 10 ? ints(ins[3]) : attrInts(n, "axes")) ?? range(starts.length);
  const steps = (opset >= 10 ? ints(ins[4]) : undefined) ?? starts.map(() => 1);
  const picks = x.dims.map((d) => range(d));
  axes.forEach((a0, i) => {
    const a = a0 < 0 ? a0 + r : a0;
    const d = x.dims[a]!;
    const step = steps[i]!;
    const clampS = (v: number) => (v < 0 ? v + d : v);
    let s = clampS(starts[i]!), e = clampS(ends[i]!);
    const p: number[] = [];
    if (step > 0) {
      s = Math.min(Math.max(s, 0), d); e = Math.min(Math.max(e, 0), d);
      for (let k = s; k < e; k += step) p.push(k);
    } else {
      s = Math.min(Math.max(s, -1), d - 1); e = Math.min(Math.max(e, -1), d - 1);
      for (let k = s; k > e; k += step) p.push(k);
    }
    picks[a] = p;
  });
  return [select(x, picks)];
}
