/**
 * CumSum and GatherElements on run-time data. RoBERTa-family embeddings (RoBERTa,
 * XLM-RoBERTa, CamemBERT) number their positions cumsum(ids != pad) along the sequence, and
 * transformers reads their token types from a [1, max_positions] buffer, expanded to the batch,
 * with GatherElements at those positions.
 *
 * Both may work along the batch axis: a CumSum there sums over samples, a GatherElements there
 * takes run-time sample numbers. Both are what ONNX says; memlane-rt's CPU backend then runs the
 * batch whole instead of in chunks of samples (cpu_backend.cc `chunkable`, mirrored in
 * src/compiler/native-chunk.ts).
 */
import { attrInt, normAxis } from "./attrs.ts";
import { type DType, batchAxis, fmtDim, fmtShape, numel } from "./ir.ts";
import { type Lowering, type OpCtx, shapeError } from "./op-ctx.ts";

const SUMMED: readonly DType[] = ["float32", "int64", "int32"];

/** An ONNX 0/1 flag attribute, or an error naming it and the value found. */
function flag(c: OpCtx, name: string): number {
  const v = attrInt(c.node, name, 0);
  if (v !== 0 && v !== 1) throw shapeError(c, `attribute ${name} is ${v}; ONNX allows 0 or 1`);
  return v;
}

/** CumSum(x, axis) with `exclusive` and `reverse`; the axis a constant integer scalar. */
export const CumSum: Lowering = (c) => {
  const x = c.actAny(0);
  const dt = c.dtype(0)!;
  if (!SUMMED.includes(dt)) throw shapeError(c, `input "${c.node.inputs[0]}" is ${dt}; memlane-rt sums ${SUMMED.join(", ")}`);
  if (!c.node.inputs[1]) throw shapeError(c, "the axis (input 1) is missing");
  const a = c.weight(1);
  if (!a) throw shapeError(c, `the axis (input 1, "${c.node.inputs[1]}") must be a constant; it is computed at run time`);
  if (a.isFloat || a.dims.length > 1 || numel(a.dims) !== 1) {
    throw shapeError(c, `the axis (input 1, "${c.node.inputs[1]}") must be one integer, found ${a.isFloat ? "a float" : "an integer"} tensor ${fmtShape(a.dims)}`);
  }
  const axis = normAxis(c.node, a.data[0]!, x.length);
  return { shapes: [x], dtypes: [dt], inputs: [c.node.inputs[0]!], attrs: { axis, exclusive: flag(c, "exclusive"), reverse: flag(c, "reverse") } };
};

/**
 * GatherElements(data, indices, axis): the result has the indices' shape and the data's
 * dtype; every dim but `axis` is at most the data's (ONNX Runtime refuses more, it does not
 * broadcast). With the batch that means: a batch dim of the indices meets the same batch dim
 * in the data, and a batch dim of the data off `axis` meets the same in the indices.
 */
export const GatherElements: Lowering = (c) => {
  const w = c.weight(0), iw = c.weight(1);
  const data = w ? w.dims : c.actAny(0);
  const it = c.dtype(1);
  if (it !== "int64" && it !== "int32") throw shapeError(c, `indices are ${it}, expected int64 or int32`);
  const axis = normAxis(c.node, attrInt(c.node, "axis", 0), data.length);
  if (iw) {
    // The result has the indices' (fixed) shape: no batch dimension is left for it.
    const why = batchAxis(data) === axis ? `would pick samples along the batch axis ${axis} of ${fmtShape(data)}` : `give a result of their fixed shape ${fmtShape(iw.dims)}, without the batch`;
    throw shapeError(c, `constant indices "${c.node.inputs[1]}" ${why}`);
  }
  const idims = c.actAny(1);
  if (idims.length !== data.length) throw shapeError(c, `data ${fmtShape(data)} and indices ${fmtShape(idims)} must have the same rank`);
  data.forEach((d, i) => {
    const k = idims[i]!;
    if (i === axis || k === d) return;
    if (d < 0) throw shapeError(c, `axis ${i} is the data's batch (${fmtDim(d)}) but ${fmtDim(k)} in the indices ${fmtShape(idims)}: off the gathered axis ${axis}, the indices must keep the data's batch`);
    if (k < 0) throw shapeError(c, `axis ${i} of the indices ${fmtShape(idims)} is the batch but ${d} in the data ${fmtShape(data)}: off the gathered axis ${axis}, an indices dim must not exceed the data's (ONNX Runtime refuses a batch above ${d})`);
    if (k > d) throw shapeError(c, `axis ${i}: the indices' dim ${k} exceeds the data's ${d} (only the gathered axis ${axis} may differ); indices ${fmtShape(idims)}, data ${fmtShape(data)}`);
  });
  const dt = c.dtype(0)!;
  return { shapes: [idims], dtypes: [dt], inputs: [w ? c.constAs(0, dt) : c.node.inputs[0]!, c.node.inputs[1]!], attrs: { axis } };
};
