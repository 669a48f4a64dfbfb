/** Conv and pooling ops: attribute defaults, auto_pad resolution and output shapes (2-D, and 1-D as 2-D). */
import { attrInt, attrInts, attrString } from "./attrs.ts";
import { type Lowered, type Lowering, type OpCtx, floatAct, requireRank, requireWeight, shapeError } from "./op-ctx.ts";
import { fmtShape } from "./ir.ts";

interface Window {
  kernel: number[];
  strides: number[];
  dilations: number[];
  pads: number[]; // [top, left, bottom, right]
  out: number[];
}

/** Resolve strides/dilations/pads (explicit or auto_pad) and the output H, W. */
function window(c: OpCtx, inHW: number[], kernel: number[], ceil: boolean): Window {
  const n = c.node;
  const strides = attrInts(n, "strides", [1, 1]);
  const dilations = attrInts(n, "dilations", [1, 1]);
  const autoPad = attrString(n, "auto_pad", "NOTSET");
  let pads = attrInts(n, "pads", [0, 0, 0, 0]);
  if ([strides, dilations, kernel].some((a) => a.length !== 2) || pads.length !== 4) {
    throw shapeError(c, `only 2-D windows are supported (kernel [${kernel}], strides [${strides}], pads [${pads}])`);
  }
  const eff = kernel.map((k, i) => (k - 1) * dilations[i]! + 1);
  if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") {
    const out = inHW.map((d, i) => Math.ceil(d / strides[i]!));
    const total = out.map((o, i) => Math.max(0, (o - 1) * strides[i]! + eff[i]! - inHW[i]!));
    const head = total.map((t) => (autoPad === "SAME_UPPER" ? Math.floor(t / 2) : Math.ceil(t / 2)));
    pads = [head[0]!, head[1]!, total[0]! - head[0]!, total[1]! - head[1]!];
  } else if (autoPad === "VALID") {
    pads = [0, 0, 0, 0];
  } else if (autoPad !== "NOTSET") {
    throw shapeError(c, `auto_pad "${autoPad}" is not an ONNX value`);
  }
  const out = inHW.map((d, i) => {
    const span = d + pads[i]! + pads[i + 2]! - eff[i]!;
    let o = (ceil ? Math.ceil(span / strides[i]!) : Math.floor(span / strides[i]!)) + 1;
    // ceil_mode: the last window must start inside the input or its leading padding
    // (the rule PyTorch and ONNX Runtime apply).
    if (ceil && (o - 1) * strides[i]! >= d + pads[i]!) o--;
    return o;
  });
  if (out.some((o) => o < 1)) throw shapeError(c, `the window does not fit the input ${fmtShape([-1, 0, ...inHW])}: output H, W would be [${out}]`);
  return { kernel, strides, dilations, pads, out };
}

/**
 * A 1-D window op (X [N, C, L]) as the 2-D one over [N, C, 1, L]: attributes given for the one
 * spatial axis get the row axis's neutral value in front (kernel 1, stride 1, dilation 1, pads
 * 0, output_padding 0); a Reshape to rank 4 before it and one back to rank 3 after it. Whisper's
 * and wav2vec2's front ends, text and time-series CNNs, the pools beside them, and the
 * transposed convs of vocoders and audio codecs' decoders.
 */
export function as2d(c: OpCtx, lower: Lowering): Lowered {
  const n = c.node;
  const attrs = new Map(n.attrs);
  const perAxis = [["kernel_shape", 1], ["strides", 1], ["dilations", 1], ["output_padding", 0], ["output_shape", 1]] as const;
  for (const [name, front] of perAxis) {
    const v = attrInts(n, name);
    if (!v) continue;
    if (v.length !== 1) throw shapeError(c, `a 1-D window's ${name} must have 1 entry, found [${v}]`);
    attrs.set(name, [front, v[0]!]);
  }
  const pads = attrInts(n, "pads");
  if (pads) {
    if (pads.length !== 2) throw shapeError(c, `a 1-D window's pads must have 2 entries, found [${pads}]`);
    attrs.set("pads", [0, pads[0]!, 0, pads[1]!]);
  }
  const node2d = { ...n, attrs };
  const x = c.act(0);
  const x4 = [x[0]!, x[1]!, 1, x[2]!];
  // A conv's weight gets the row axis too: [M, C/group, 1, k] (a ConvTranspose's [C, M/group,
  // 1, k], which its lowering then permutes into a constant of its own).
  const w = n.opType === "Conv" || n.opType === "ConvTranspose" ? c.weight(1) : undefined;
  const w4 = w && w.dims.length === 3 ? { ...w, dims: [w.dims[0]!, w.dims[1]!, 1, w.dims[2]!] } : undefined;
  const inputs = w4 && n.opType === "Conv" ? [n.inputs[0]!, c.addConst(`${n.inputs[1]}.2d`, w4), ...n.inputs.slice(2)] : undefined;
  const ctx2d: OpCtx = {
    ...c,
    node: { ...node2d, inputs: inputs ?? n.inputs },
    act: (i) => (i === 0 ? x4 : c.act(i)),
    weight: (i) => (i === 1 && w4 ? w4 : c.weight(i)),
  };
  const low = lower(ctx2d);
  const y4 = low.shapes[0]!;
  return {
    ...low,
    ...(inputs && !low.inputs ? { inputs } : {}),
    before: { op: "Reshape", attrs: { shape: x4 }, shape: x4 },
    then: { op: "Reshape", attrs: { shape: [y4[0]!, y4[1]!, y4[3]!] }, shape: [y4[0]!, y4[1]!, y4[3]!] },
  };
}

export const Conv: Lowering = (c) => {
  const x = c.act(0);
  if (x.length === 3) return as2d(c, Conv);
  requireRank(c, x, 4, "Conv input X (1-D or 2-D convolution: [N, C, L] or [N, C, H, W])");
  const w = requireWeight(c, 1, "Conv weight W");
  if (w.dims.length !== 4) throw shapeError(c, `Conv weight W must be [M, C/group, kh, kw], found [${w.dims}]`);
  const group = attrInt(c.node, "group", 1);
  const [m, cg, kh, kw] = w.dims as [number, number, number, number];
  if (x[1]! !== cg * group || m % group !== 0) {
    throw shapeError(c, `input has ${x[1]} channels but W [${w.dims}] with group ${group} expects ${cg * group}`);
  }
  if (c.node.inputs[2]) {
    const b = requireWeight(c, 2, "Conv bias B");
    if (b.dims.length !== 1 || b.dims[0] !== m) throw shapeError(c, `Conv bias B must be [${m}], found [${b.dims}]`);
  }
  const kernel = attrInts(c.node, "kernel_shape", [kh, kw]);
  const win = window(c, [x[2]!, x[3]!], kernel, false);
  return {
    shapes: [[x[0]!, m, ...win.out]],
    attrs: { kernel, strides: win.strides, pads: win.pads, dilations: win.dilations, group, activation: "none" },
  };
};

function pool(kind: "MaxPool" | "AveragePool"): Lowering {
  const lower: Lowering = (c) => {
    const x = c.act(0);
    if (x.length === 3) return as2d(c, lower);
    requireRank(c, x, 4, `${kind} input X (1-D or 2-D pooling: [N, C, L] or [N, C, H, W])`);
    if (kind === "MaxPool" && c.node.outputs[1]) throw shapeError(c, "the Indices output of MaxPool is not supported");
    const kernel = attrInts(c.node, "kernel_shape");
    if (!kernel) throw shapeError(c, "kernel_shape is required");
    const ceilMode = attrInt(c.node, "ceil_mode", 0);
    const win = window(c, [x[2]!, x[3]!], kernel, ceilMode === 1);
    const shapes = [[x[0]!, x[1]!, ...win.out]];
    const base = { kernel, strides: win.strides, pads: win.pads };
    if (kind === "MaxPool") return { shapes, attrs: { ...base, dilations: win.dilations, ceilMode } };
    if (win.dilations.some((d) => d !== 1)) throw shapeError(c, "dilated AveragePool is not supported");
    return { shapes, attrs: { ...base, ceilMode, countIncludePad: attrInt(c.node, "count_include_pad", 0) } };
  };
  return lower;
}

export const MaxPool = pool("MaxPool");
export const AveragePool = pool("AveragePool");

export const GlobalAveragePool: Lowering = (c) => {
  const x = c.act(0);
  if (x.length < 3) throw shapeError(c, `input must be [N, C, spatial...], found ${fmtShape(x)}`);
  return { shapes: [[x[0]!, x[1]!, ...x.slice(2).map(() => 1)]], attrs: {} };
};

/**
 * GlobalMaxPool (AdaptiveMaxPool2d(1), CBAM's channel attention) as a ReduceMax over the spatial
 * axes, keeping them as 1s: the same values, and a kernel memlane-rt already has.
 */
export const GlobalMaxPool: Lowering = (c) => {
  const x = c.act(0);
  if (x.length < 3) throw shapeError(c, `input must be [N, C, spatial...], found ${fmtShape(x)}`);
  return { op: "ReduceMax", shapes: [[x[0]!, x[1]!, ...x.slice(2).map(() => 1)]], inputs: [c.node.inputs[0]!], attrs: { axes: x.slice(2).map((_, i) => i + 2), keepdims: 1 } };
};

/**
 * ReduceMean over exactly the spatial axes (what torch's dynamo exporter emits for
 * AdaptiveAvgPool2d(1) and x.mean((2, 3))) is GlobalAveragePool, plus a Flatten to
 * [N, C] when keepdims = 0.
 */
export const ReduceMean: Lowering = (c) => {
  const x = c.act(0);
  const fromInput = c.opset >= 18 && c.node.inputs[1];
  const raw = fromInput ? c.weight(1) && Array.from(c.weight(1)!.data) : attrInts(c.node, "axes");
  if (fromInput && !raw) throw shapeError(c, "the axes are computed at run time; only constant axes are supported");
  const axes = (raw ?? []).map((a) => (a < 0 ? a + x.length : a)).sort((a, b) => a - b);
  const spatial = x.slice(2).map((_, i) => i + 2);
  if (x.length < 3 || axes.length !== spatial.length || axes.some((a, i) => a !== spatial[i])) {
    throw shapeError(c, `only a mean over all spatial axes [${spatial}] of ${fmtShape(x)} is supported (as GlobalAveragePool), found axes [${raw ?? "all"}]`);
  }
  const pooled = [-1, x[1]!, ...spatial.map(() => 1)];
  const keep = attrInt(c.node, "keepdims", 1) === 1;
  return {
    op: "GlobalAveragePool",
    inputs: [c.node.inputs[0]!],
    shapes: [pooled],
    attrs: {},
    ...(keep ? {} : { then: { op: "Flatten", attrs: { axis: 1 }, shape: [-1, x[1]!] } }),
  };
};

/**
 * InstanceNormalization (wav2vec2's and HuBERT's first feature conv: GroupNorm with a group a
 * channel) as ONNX nodes (Lowered.expand): normalising each (sample, channel) over the spatial
 * axes is a LayerNormalization from axis 2 with unit scale, then the per-channel scale and
 * bias as a Mul and an Add by [C, 1, ...] weights.
 */
export const InstanceNormalization: Lowering = (c) => {
  const x = c.act(0);
  if (x.length < 3) throw shapeError(c, `input must be [N, C, spatial...], found ${fmtShape(x)}`);
  const ch = x[1]!, spatial = x.slice(2);
  const perChannel = [1, 2].map((i) => {
    const t = requireWeight(c, i, ["", "scale", "B"][i]!);
    if (t.dims.length !== 1 || t.dims[0] !== ch) throw shapeError(c, `per-channel input ${i} must be [${ch}], found [${t.dims}]`);
    return c.addConst(`${c.node.inputs[i]}.per_channel`, { ...t, dims: [ch, ...spatial.map(() => 1)] });
  });
  const n = spatial.reduce((a, d) => a * d, 1);
  const ones = c.addConst(`${c.node.name}.unit_scale`, { isFloat: true, dims: spatial, data: new Float32Array(n).fill(1) });
  const normed = c.freshName(`${c.node.outputs[0]}.normed`), scaled = c.freshName(`${c.node.outputs[0]}.scaled`);
  const eps = c.node.attrs.get("epsilon") ?? 1e-5;
  return {
    shapes: [], attrs: {},
    expand: [
      { opType: "LayerNormalization", name: `${c.node.name}.normalise`, inputs: [c.node.inputs[0]!, ones], outputs: [normed], attrs: new Map([["axis", 2], ["epsilon", eps]]) },
      { opType: "Mul", name: `${c.node.name}.scale`, inputs: [normed, perChannel[0]!], outputs: [scaled], attrs: new Map() },
      { opType: "Add", name: c.node.name, inputs: [scaled, perChannel[1]!], outputs: [c.node.outputs[0]!], attrs: new Map() },
    ],
  };
};

/** Kept as a node until rewrite.ts folds it into a Conv or splits it into Mul + Add. */
export const BatchNormalization: Lowering = (c) => {
  // The batch may be k·batch or elsewhere (LeViT's BatchNorm1d over [196·batch, 256]): the
  // standalone Mul + Add broadcast over any layout; only the channel axis (1) must not be it.
  const x = floatAct(c, 0);
  if (x.length < 2 || x[1]! < 0) throw shapeError(c, `input must be [N, C, ...] with the channels on axis 1, found ${fmtShape(x)}`);
  if (c.node.outputs.slice(1).some((o) => o)) throw shapeError(c, "training-mode BatchNormalization (running mean/var outputs) is not supported");
  for (let i = 1; i <= 4; i++) {
    const t = requireWeight(c, i, ["", "scale", "B", "mean", "var"][i]!);
    if (t.dims.length !== 1 || t.dims[0] !== x[1]) throw shapeError(c, `per-channel input ${i} must be [${x[1]}], found [${t.dims}]`);
  }
  return { shapes: [x], attrs: { epsilon: attrInt(c.node, "epsilon", 1e-5) } };
};
