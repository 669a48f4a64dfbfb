/**
 * GatherND (batch_dims 0) and element-wise Max / Min on run-time data. transformers' dynamo
 * exports build attention masks as mask[arange(batch), arange(seq)]: GatherND over index
 * tuples made of run-time Ranges, with a Max whose only use is the shape of those tuples.
 */
import { attrInt } from "./attrs.ts";
import { batchAxis, fmtShape } from "./ir.ts";
import { type Lowering, shapeError } from "./op-ctx.ts";
import { Binary } from "./ops-data.ts";

/** Max / Min of two inputs (numpy broadcasting, float32 / int64 / int32), as Add's rules. */
export const MinMax: Lowering = (c) => {
  const n = c.node.inputs.filter((s) => s).length;
  if (n !== 2 || c.node.inputs.length !== 2) throw shapeError(c, `${n} inputs; memlane-rt computes ${c.node.opType} of exactly two`);
  return Binary(c);
};

export const GatherND: Lowering = (c) => {
  const bd = attrInt(c.node, "batch_dims", 0);
  if (bd !== 0) throw shapeError(c, `batch_dims ${bd} is not supported (only 0)`);
  const w = c.weight(0), iw = c.weight(1);
  const data = w ? w.dims : c.actAny(0);
  const idims = iw ? iw.dims : c.actAny(1);
  const it = c.dtype(1);
  if (it !== "int64" && it !== "int32") throw shapeError(c, `indices are ${it}, expected int64 or int32`);
  const r = idims[idims.length - 1];
  if (r === undefined || r < 1 || r > data.length) {
    throw shapeError(c, `the indices ${fmtShape(idims)} must end in a fixed dim of 1..${data.length} (the rank of data ${fmtShape(data)})`);
  }
  const dataBatch = batchAxis(data);
  // A tuple may address the data's batch only when the tuples come from run-time data (the
  // batch's own Range); the result's batch is then the indices'.
  if (dataBatch >= 0 && dataBatch < r && iw) throw shapeError(c, `constant indices would pick samples along the batch axis ${dataBatch} of ${fmtShape(data)}`);
  const shape = [...idims.slice(0, -1), ...data.slice(r)];
  if (shape.filter((d) => d < 0).length !== 1) {
    throw shapeError(c, `data ${fmtShape(data)} and indices ${fmtShape(idims)} give ${fmtShape(shape)}: the result needs exactly one batch dimension`);
  }
  const inputs = [w ? c.constAs(0, c.dtype(0)!) : c.node.inputs[0]!, iw ? c.constAs(1, "int64") : c.node.inputs[1]!];
  return { shapes: [shape], dtypes: [c.dtype(0)!], inputs, attrs: {} };
};
