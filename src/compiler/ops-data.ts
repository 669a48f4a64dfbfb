/**
 * Element-wise ops on run-time data of any plan dtype (float32, int64, int32, bool) and the
 * embedding lookup: numpy broadcasting where the batch (k·batch, -k in a shape) may sit at
 * any axis but must meet only itself or a 1.
 */
import { attrInt, normAxis } from "./attrs.ts";
import { dtypeOfOnnx } from "./graph-inputs.ts";
import { type DType, batchAxis, fmtShape, numel } from "./ir.ts";
import { type Lowered, type Lowering, type OpCtx, shapeError } from "./op-ctx.ts";

interface Operand {
  dims: number[];
  isConst: boolean;
}

function operand(c: OpCtx, i: number): Operand {
  const w = c.weight(i);
  return w ? { dims: w.dims, isConst: true } : { dims: c.actAny(i), isConst: false };
}

/** numpy broadcasting over symbolic dims; the result has exactly one batch dimension. */
export function broadcastShapes(c: OpCtx, parts: Operand[]): number[] {
  const r = Math.max(...parts.map((p) => p.dims.length));
  const out: number[] = [];
  const text = () => parts.map((p) => `${p.isConst ? "weight " : ""}${fmtShape(p.dims)}`).join(" and ");
  for (let i = 0; i < r; i++) {
    let d = 1;
    for (const p of parts) {
      const pd = p.dims[p.dims.length - r + i] ?? 1;
      if (pd === 1 || pd === d) continue;
      if (d !== 1) {
        const why = pd < 0 || d < 0 ? "the batch would broadcast against another dimension" : "they do not broadcast";
        throw shapeError(c, `inputs ${text()}: ${why} (axis ${i} of the result)`);
      }
      d = pd;
    }
    out.push(d);
  }
  if (out.filter((d) => d < 0).length !== 1) throw shapeError(c, `inputs ${text()} would put the batch in ${out.filter((d) => d < 0).length} dimensions`);
  return out;
}

/** The dtype the op computes in: its activations' (all equal); constants are converted to it. */
function commonDtype(c: OpCtx, idx: number[], allowed: DType[]): DType {
  const acts = idx.filter((i) => !c.weight(i));
  const dts = [...new Set(acts.map((i) => c.dtype(i)!))];
  if (dts.length > 1) throw shapeError(c, `inputs have different dtypes ${dts.join(" and ")}`);
  const dt = dts[0] ?? c.dtype(idx[0]!)!;
  if (!allowed.includes(dt)) throw shapeError(c, `input dtype ${dt} is not supported (expected ${allowed.join(", ")})`);
  return dt;
}

function elementwise(c: OpCtx, idx: number[], dt: DType, outDtype: DType, attrs: Lowered["attrs"] = {}, typed: Record<number, DType> = {}): Lowered {
  const shape = broadcastShapes(c, idx.map((i) => operand(c, i)));
  const inputs = idx.map((i) => (c.weight(i) ? c.constAs(i, typed[i] ?? dt) : c.node.inputs[i]!));
  return { shapes: [shape], dtypes: [outDtype], inputs, attrs };
}

const NUMERIC: DType[] = ["float32", "int64", "int32"];

/** Add, Sub, Mul, Div on float32, int64 or int32 (integer Div truncates, as ONNX's). */
export const Binary: Lowering = (c) => {
  const dt = commonDtype(c, [0, 1], NUMERIC);
  return elementwise(c, [0, 1], dt, dt);
};

export const Mod: Lowering = (c) => {
  const dt = commonDtype(c, [0, 1], NUMERIC);
  const fmod = attrInt(c.node, "fmod", 0);
  if (dt === "float32" && fmod !== 1) throw shapeError(c, "Mod on floats needs fmod = 1 (ONNX)");
  return elementwise(c, [0, 1], dt, dt, { fmod });
};

/** Equal, Less, Greater, LessOrEqual, GreaterOrEqual -> bool. */
export const Compare: Lowering = (c) => {
  const dt = commonDtype(c, [0, 1], c.node.opType === "Equal" ? [...NUMERIC, "bool"] : NUMERIC);
  return elementwise(c, [0, 1], dt, "bool");
};

/** And, Or on bool. */
export const Logic: Lowering = (c) => elementwise(c, [0, 1], commonDtype(c, [0, 1], ["bool"]), "bool");

export const Not: Lowering = (c) => {
  if (c.dtype(0) !== "bool") throw shapeError(c, `input is ${c.dtype(0)}, Not takes bool`);
  return { shapes: [c.actAny(0)], dtypes: ["bool"], attrs: {} };
};

export const Where: Lowering = (c) => {
  const dt = commonDtype(c, [1, 2], [...NUMERIC, "bool"]);
  if (c.dtype(0) !== "bool" && !c.weight(0)) throw shapeError(c, `the condition is ${c.dtype(0)}, expected bool`);
  return elementwise(c, [0, 1, 2], dt, dt, {}, { 0: "bool" });
};

export const Cast: Lowering = (c) => {
  const to = attrInt(c.node, "to", 1);
  const dt = dtypeOfOnnx(to);
  if (!dt) throw shapeError(c, `Cast to ONNX type ${to} is not supported (plan v2 has float32, int64, int32, bool)`);
  return { shapes: [c.actAny(0)], dtypes: [dt], attrs: { to: dt } };
};

/**
 * Gather: an embedding lookup (weight table, run-time indices) or a pick along a non-batch
 * axis of an activation (constant indices, checked and made non-negative here).
 */
export const Gather: Lowering = (c) => {
  const w = c.weight(0), iw = c.weight(1);
  const data = w ? w.dims : c.actAny(0);
  const axis = normAxis(c.node, attrInt(c.node, "axis", 0), data.length);
  // Both at run time: only when the data's batch is the gathered axis (a flat [k·batch] table
  // that batch-aware indices address, as transformers' flattened attention masks are); the
  // result's batch is then the indices'. Otherwise the two batches would multiply.
  if (!w && !iw && batchAxis(data) !== axis)
    throw shapeError(c, "data and indices are both computed at run time; their batches would multiply");
  let indices: string, idims: number[];
  if (iw) {
    if (data[axis]! < 0) throw shapeError(c, `axis ${axis} of ${fmtShape(data)} is the batch; picking samples is not supported`);
    const n = data[axis]!;
    const vals = Array.from(iw.data, (v) => (v < 0 ? v + n : v));
    const bad = vals.findIndex((v) => v < 0 || v >= n || !Number.isInteger(v));
    if (bad >= 0) throw shapeError(c, `index ${iw.data[bad]} is out of range for axis ${axis} of size ${n}`);
    indices = c.addConst(`${c.node.inputs[1]}.indices`, { isFloat: false, dims: [...iw.dims], data: Float64Array.from(vals), dtype: "int64" });
    idims = iw.dims;
  } else {
    const dt = c.dtype(1);
    if (dt !== "int64" && dt !== "int32") throw shapeError(c, `indices are ${dt}, expected int64 or int32`);
    indices = c.node.inputs[1]!;
    idims = c.actAny(1);
  }
  const shape = [...data.slice(0, axis), ...idims, ...data.slice(axis + 1)];
  if (batchAxis(shape) < 0 || numel(shape.map(Math.abs)) === 0) throw shapeError(c, `result ${fmtShape(shape)} has no batch or is empty`);
  const dataName = w ? c.constAs(0, c.dtype(0)!) : c.node.inputs[0]!;
  return { shapes: [shape], dtypes: [c.dtype(0)!], inputs: [dataName, indices], attrs: { axis } };
};
