/**
 * TopK on run-time data (cpu/topk.cc): the k largest or smallest along any axis but the batch's,
 * sorted, values in the input's type and int64 indices. K must be a constant (opset 10 on an
 * input, before it the `k` attribute). sorted = 0 leaves ONNX's order unspecified; the plan
 * sorts either way.
 */
import { attrInt, normAxis } from "./attrs.ts";
import { type DType, fmtShape } from "./ir.ts";
import { type Lowering, shapeError } from "./op-ctx.ts";

const COMPARED: readonly DType[] = ["float32", "int64", "int32"];

export const TopK: Lowering = (c) => {
  const x = c.actAny(0);
  const dt = c.dtype(0)!;
  if (!COMPARED.includes(dt)) throw shapeError(c, `input "${c.node.inputs[0]}" is ${dt}; memlane-rt compares ${COMPARED.join(", ")}`);
  const axis = normAxis(c.node, attrInt(c.node, "axis", -1), x.length);
  if (x[axis]! < 0) throw shapeError(c, `axis ${axis} of ${fmtShape(x)} is the batch; a TopK across samples is not supported`);
  let k: number;
  if (c.opset >= 10) {
    const t = c.weight(1);
    if (!t || t.data.length !== 1) throw shapeError(c, `K ("${c.node.inputs[1] ?? ""}") must be a constant of one element; one computed at run time is not supported`);
    k = Number(t.data[0]);
  } else {
    k = attrInt(c.node, "k", 0);
  }
  if (!Number.isInteger(k) || k < 1 || k > x[axis]!) throw shapeError(c, `K = ${k} is not in 1..${x[axis]} (axis ${axis} of ${fmtShape(x)})`);
  const largest = attrInt(c.node, "largest", 1);
  if (largest !== 0 && largest !== 1) throw shapeError(c, `attribute largest is ${largest}; ONNX allows 0 or 1`);
  const out = x.map((d, i) => (i === axis ? k : d));
  return { shapes: [out, out], dtypes: [dt, "int64"], inputs: [c.node.inputs[0]!], attrs: { axis, k, largest } };
};
