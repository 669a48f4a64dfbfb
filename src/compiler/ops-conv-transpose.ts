/**
 * ConvTranspose: its output size and pads by ONNX's rules (explicit pads and output_padding,
 * output_shape, auto_pad), shared with the estimate's replay of ORT (ort-shapes.ts), and the
 * plan op memlane-rt runs (cpu/conv_transpose.cc, cuda/ops/conv_transpose.cu): 2-D, a 1-D one
 * as 2-D (ops-conv.ts as2d), the weight permuted to [group, M/group, kh, kw, C/group].
 */
import { attrInt, attrInts, attrString } from "./attrs.ts";
import { fmtShape } from "./ir.ts";
import type { Node } from "./ir.ts";
import { type Lowering, requireRank, requireWeight, shapeError } from "./op-ctx.ts";
import { as2d } from "./ops-conv.ts";

export interface TransposeWindow {
  kernel: number[];
  strides: number[];
  dilations: number[];
  /** Begins then ends, one a spatial axis; output_padding taken off the ends (they may be negative). */
  pads: number[];
  out: number[];
}

/**
 * The output size of each spatial axis and the pads that give it, as ONNX Runtime 1.32 computes
 * them (measured): explicit pads plus output_padding; or output_shape, whose total padding is
 * split with the odd one at the end for SAME_UPPER and at the beginning otherwise; or auto_pad
 * SAME_* without output_shape, an output of input · stride split the same way; VALID, no pads.
 * `kernel` is W's spatial dims unless kernel_shape says otherwise.
 */
export function transposeWindow(n: Node, inSpatial: readonly number[], wKernel: readonly number[]): TransposeWindow {
  const k = inSpatial.length;
  const at = (name: string, def: number) => attrInts(n, name) ?? new Array<number>(k).fill(def);
  const kernel = attrInts(n, "kernel_shape") ?? [...wKernel];
  const [strides, dilations, outPad] = [at("strides", 1), at("dilations", 1), at("output_padding", 0)];
  const autoPad = attrString(n, "auto_pad", "NOTSET");
  const given = attrInts(n, "output_shape");
  let pads = attrInts(n, "pads") ?? new Array<number>(2 * k).fill(0);
  const full = inSpatial.map((d, i) => strides[i]! * (d - 1) + outPad[i]! + (kernel[i]! - 1) * dilations[i]! + 1);
  const split = (total: number[]) => {
    const head = total.map((t) => (autoPad === "SAME_UPPER" ? Math.floor(t / 2) : t - Math.floor(t / 2)));
    return [...head, ...total.map((t, i) => t - head[i]!)];
  };
  if (given) {
    pads = split(full.map((f, i) => f - given[given.length - k + i]!));
  } else if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") {
    pads = split(full.map((f, i) => f - inSpatial[i]! * strides[i]!));
  } else if (autoPad === "VALID") {
    pads = new Array<number>(2 * k).fill(0);
  }
  // output_padding adds rows at the end: an end pad that much smaller.
  const ends = pads.slice(k).map((p, i) => p - outPad[i]!);
  const out = full.map((f, i) => f - pads[i]! - pads[k + i]!);
  return { kernel, strides, dilations, pads: [...pads.slice(0, k), ...ends], out };
}

export const ConvTranspose: Lowering = (c) => {
  const x = c.act(0);
  if (x.length === 3) return as2d(c, ConvTranspose);
  requireRank(c, x, 4, "ConvTranspose input X (1-D or 2-D: [N, C, L] or [N, C, H, W])");
  const w = requireWeight(c, 1, "ConvTranspose weight W");
  if (w.dims.length !== 4) throw shapeError(c, `ConvTranspose weight W must be [C, M/group, kh, kw], found [${w.dims}]`);
  const group = attrInt(c.node, "group", 1);
  const [cin, mg, kh, kw] = w.dims as [number, number, number, number];
  if (x[1] !== cin || cin % group !== 0) throw shapeError(c, `input has ${x[1]} channels but W [${w.dims}] with group ${group} expects ${cin}`);
  const m = mg * group;
  if (c.node.inputs[2]) {
    const b = requireWeight(c, 2, "ConvTranspose bias B");
    if (b.dims.length !== 1 || b.dims[0] !== m) throw shapeError(c, `ConvTranspose bias B must be [${m}], found [${b.dims}]`);
  }
  const win = transposeWindow(c.node, [x[2]!, x[3]!], [kh, kw]);
  if (win.kernel[0] !== kh || win.kernel[1] !== kw) throw shapeError(c, `kernel_shape [${win.kernel}] differs from W [${w.dims}]`);
  if (win.out.some((o) => o < 1)) throw shapeError(c, `the output of ${fmtShape(x)} would be [${win.out}]`);
  // [C, M/g, kh, kw] -> [g, M/g, kh, kw, C/g]: each (m, i, j) row of C/g weights contiguous.
  const cg = cin / group;
  const data = new Float32Array(w.data.length);
  for (let ci = 0; ci < cin; ci++) {
    const g = Math.floor(ci / cg), cc = ci % cg;
    for (let r = 0; r < mg * kh * kw; r++) data[(g * mg * kh * kw + r) * cg + cc] = w.data[ci * mg * kh * kw + r]!;
  }
  const packed = c.addConst(`${c.node.inputs[1]}.taps`, { isFloat: true, dims: [group, mg, kh, kw, cg], data });
  return {
    shapes: [[x[0]!, m, ...win.out]],
    inputs: [c.node.inputs[0]!, packed, ...c.node.inputs.slice(2)],
    attrs: { kernel: win.kernel, strides: win.strides, pads: win.pads, dilations: win.dilations, group },
  };
};
