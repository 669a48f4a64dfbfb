/**
 * ArgMax on run-time data: CLIP's text encoder pools each sequence at argmax(input_ids == eos)
 * (an int32 Cast of the comparison), then gathers that row from the flattened hidden states.
 * Any axis but the batch's (a result per sample); float32, int64 or int32 in, int64 out.
 */
import { attrInt, normAxis } from "./attrs.ts";
import { type DType, fmtShape } from "./ir.ts";
import { type Lowering, shapeError } from "./op-ctx.ts";

const COMPARED: readonly DType[] = ["float32", "int64", "int32"];

export const ArgMax: Lowering = (c) => {
  const x = c.actAny(0);
  const dt = c.dtype(0)!;
  if (!COMPARED.includes(dt)) throw shapeError(c, `input "${c.node.inputs[0]}" is ${dt}; memlane-rt compares ${COMPARED.join(", ")}`);
  const axis = normAxis(c.node, attrInt(c.node, "axis", 0), x.length);
  if (x[axis]! < 0) throw shapeError(c, `axis ${axis} of ${fmtShape(x)} is the batch; an ArgMax across samples is not supported`);
  const flags = ["keepdims", "select_last_index"].map((name, i) => {
    const v = attrInt(c.node, name, i === 0 ? 1 : 0);
    if (v !== 0 && v !== 1) throw shapeError(c, `attribute ${name} is ${v}; ONNX allows 0 or 1`);
    return v;
  });
  const out = flags[0] ? x.map((d, i) => (i === axis ? 1 : d)) : x.filter((_, i) => i !== axis);
  return { shapes: [out], dtypes: ["int64"], attrs: { axis, keepdims: flags[0]!, select_last_index: flags[1]! } };
};
