/** Dense, elementwise and layout ops: attribute defaults, weight checks and output shapes. */
import { attrFloat, attrInt, attrInts, attrString, normAxis } from "./attrs.ts";
import { broadcastDims, mk } from "./fold-math.ts";
import { type ConstTensor, fmtShape, numel, perSample } from "./ir.ts";
import { type Lowering, type OpCtx, requireRank, requireWeight, shapeError } from "./op-ctx.ts";

export const Gemm: Lowering = (c) => {
  const a = c.act(0);
  requireRank(c, a, 2, "Gemm input A");
  if (attrInt(c.node, "transA", 0) !== 0) throw shapeError(c, "transA = 1 would move the batch out of the first dimension");
  const b = requireWeight(c, 1, "Gemm input B");
  if (b.dims.length !== 2) throw shapeError(c, `B must be 2-D, found [${b.dims}]`);
  const transB = attrInt(c.node, "transB", 0);
  const [k, n] = transB ? [b.dims[1]!, b.dims[0]!] : [b.dims[0]!, b.dims[1]!];
  if (a[1] !== k) throw shapeError(c, `A ${fmtShape(a)} and B [${b.dims}] (transB ${transB}) disagree on K`);
  const inputs = [...c.node.inputs];
  if (c.node.inputs[2]) {
    // C broadcasts to [batch, N]; the runtime gets it as a plain [N] bias.
    const cw = requireWeight(c, 2, "Gemm input C");
    const total = numel(cw.dims);
    if (cw.dims.length > 2 || (cw.dims.length === 2 && cw.dims[0] !== 1) || (total !== n && total !== 1)) {
      throw shapeError(c, `C must broadcast per sample to [${n}] (shape [], [1], [${n}] or [1, ${n}]), found [${cw.dims}]`);
    }
    if (cw.dims.length !== 1 || total !== n) inputs[2] = c.addConst(`${c.node.inputs[2]}.bias`, mk(true, [n], total === n ? cw.data : new Array(n).fill(cw.data[0])));
  }
  return {
    shapes: [[-1, n]],
    inputs,
    attrs: { alpha: attrFloat(c.node, "alpha", 1), beta: attrFloat(c.node, "beta", 1), transA: 0, transB, activation: "none" },
  };
};

export const MatMul: Lowering = (c) => {
  const a = c.act(0);
  if (a.length < 2) throw shapeError(c, `A must be [N, ..., K], found ${fmtShape(a)}`);
  const b = requireWeight(c, 1, "MatMul input B");
  if (b.dims.length !== 2 || b.dims[0] !== a[a.length - 1]) throw shapeError(c, `B must be a 2-D weight [K=${a[a.length - 1]}, M], found [${b.dims}]`);
  return { shapes: [[...a.slice(0, -1), b.dims[1]!]], attrs: {} };
};

/** Add/Sub/Mul/Div: numpy broadcasting where the batch may only meet the batch or a 1. */
export const Binary: Lowering = (c) => {
  const shapes = [0, 1].map((i) => {
    const w = c.weight(i);
    return w ? { w, dims: w.dims } : { w: undefined, dims: c.act(i) };
  });
  const [p, q] = shapes as [{ w?: ConstTensor; dims: number[] }, { w?: ConstTensor; dims: number[] }];
  const act = p.w ? q : p;
  const rank = act.dims.length;
  for (const s of [p, q]) {
    if (s.w && (s.dims.length > rank || (s.dims.length === rank && s.dims[0] !== 1))) {
      throw shapeError(c, `weight [${s.dims}] would broadcast over the batch of ${fmtShape(act.dims)}; a weight may have at most rank ${rank} with a leading 1`);
    }
    if (!s.w && s.dims.length !== rank) throw shapeError(c, `inputs ${fmtShape(p.dims)} and ${fmtShape(q.dims)} differ in rank, which would align the batch with another dimension`);
  }
  const out = broadcastDims(p.dims, q.dims);
  if (!out || out[0] !== -1) throw shapeError(c, `inputs ${fmtShape(p.dims)} and ${fmtShape(q.dims)} do not broadcast`);
  return { shapes: [out], attrs: {} };
};

export const Unary: Lowering = (c) => ({ shapes: [c.act(0)], attrs: {} });

export const LeakyRelu: Lowering = (c) => ({ shapes: [c.act(0)], attrs: { alpha: attrFloat(c.node, "alpha", 0.01) } });

export const Gelu: Lowering = (c) => {
  const approximate = attrString(c.node, "approximate", "none");
  if (approximate !== "none" && approximate !== "tanh") throw shapeError(c, `approximate "${approximate}" is not "none" or "tanh"`);
  return { shapes: [c.act(0)], attrs: { approximate } };
};

export const Flatten: Lowering = (c) => {
  const x = c.act(0);
  const axis = attrInt(c.node, "axis", 1) < 0 ? attrInt(c.node, "axis", 1) + x.length : attrInt(c.node, "axis", 1);
  if (axis < 1 || axis > x.length || numel(x.slice(1, axis)) !== 1) {
    throw shapeError(c, `axis ${attrInt(c.node, "axis", 1)} on ${fmtShape(x)} would merge the batch with other dimensions`);
  }
  return { shapes: [[-1, numel(x.slice(axis))]], attrs: { axis } };
};

export const Reshape: Lowering = (c) => {
  const x = c.act(0);
  const t = c.weight(1);
  if (!t) throw shapeError(c, `the target shape "${c.node.inputs[1]}" is computed at run time; only shapes known at compile time are supported`);
  const target = Array.from(t.data);
  const allowZero = attrInt(c.node, "allowzero", 0) === 1;
  const per = perSample(x);
  const rest = target.slice(1);
  const first = target[0];
  const restKnown = rest.every((d) => d !== -1);
  const batchFirst =
    first !== undefined &&
    (Number.isNaN(first) || (first === 0 && !allowZero) || (first === -1 && restKnown) || (first > 0 && first === c.staticBatch));
  if (!batchFirst) throw shapeError(c, `target [${target.map((d) => (Number.isNaN(d) ? "N" : d))}] does not keep the batch as its first dimension`);
  if (first !== undefined && first > 0) c.warn(`${c.node.name}: Reshape fixes the first dimension to ${first}, the model's static batch; treated as the batch`);
  if (rest.some(Number.isNaN)) throw shapeError(c, `target mixes the batch size into a non-leading dimension`);
  const dims = rest.map((d, i) => (d === 0 && !allowZero ? x[i + 1]! : d));
  const known = dims.filter((d) => d !== -1).reduce((a, b) => a * b, 1);
  const out = dims.map((d) => (d === -1 ? per / known : d));
  if (numel(out) !== per || out.some((d) => !Number.isInteger(d) || d < 0)) {
    throw shapeError(c, `cannot reshape ${fmtShape(x)} (${per} per sample) to [N, ${rest}]`);
  }
  return { shapes: [[-1, ...out]], attrs: { shape: [-1, ...out] }, inputs: [c.node.inputs[0]!] };
};

export const Transpose: Lowering = (c) => {
  const x = c.act(0);
  const perm = attrInts(c.node, "perm", x.map((_, i) => x.length - 1 - i));
  if (perm.length !== x.length) throw shapeError(c, `perm [${perm}] does not have the rank of ${fmtShape(x)}`);
  if (perm[0] !== 0) throw shapeError(c, `perm [${perm}] moves the batch to axis ${perm.indexOf(0)} of ${fmtShape(x)}; plan v1 keeps the batch first (perm[0] = 0)`);
  return { shapes: [perm.map((p) => x[p]!)], attrs: { perm } };
};

export const Softmax: Lowering = (c) => {
  const x = c.act(0);
  const axis = normAxis(c.node, attrInt(c.node, "axis", c.opset >= 13 ? -1 : 1), x.length);
  if (axis < 1) throw shapeError(c, "Softmax across the batch is not supported");
  // Before opset 13 Softmax flattened everything from `axis` on; equal only on the last axis.
  if (c.opset < 13 && axis !== x.length - 1) throw shapeError(c, `opset ${c.opset} Softmax over axes ${axis}.. (flattened) is not supported`);
  return { shapes: [x], attrs: { axis } };
};

