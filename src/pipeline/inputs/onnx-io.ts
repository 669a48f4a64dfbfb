/**
 * What `compare` needs to know about an ONNX model before running it: its graph inputs and
 * outputs (name, element type, dims) and, for tracing integer inputs to the Gather they
 * index, its nodes and the dims of its constants. Read straight from the protobuf, without
 * decoding weights and without the compiler's op checks: a model memlane-rt cannot compile
 * (a custom-domain op, an exotic dtype) must still run on ONNX Runtime.
 */
import { readFileSync } from "node:fs";
import onnxProto from "onnx-proto";
import type { DType } from "../../transport/protocol.ts";

const { onnx } = onnxProto;
const DT = onnx.TensorProto.DataType;

/** ONNX element types memlane feeds and compares, by protocol dtype. */
const DTYPES: Partial<Record<number, DType>> = {
  [DT.FLOAT]: "float32", [DT.FLOAT16]: "float16", [DT.INT64]: "int64", [DT.INT32]: "int32", [DT.BOOL]: "bool", [DT.UINT8]: "uint8",
};

/** A graph input or output: dims are numbers (static), names (symbolic) or undefined (unknown); null when even the rank is unknown. */
export interface OnnxValue {
  name: string;
  /** null: an element type memlane cannot feed (named in `elemTypeName`). */
  dtype: DType | null;
  elemTypeName: string;
  dims: (number | string | undefined)[] | null;
}

export interface OnnxNodeInfo {
  op: string;
  name: string;
  inputs: string[];
  outputs: string[];
  /** Integer attribute `axis`, where present (Gather). */
  axis?: number;
}

export interface OnnxIo {
  file: string;
  inputs: OnnxValue[];
  outputs: OnnxValue[];
  nodes: OnnxNodeInfo[];
  /** Dims of every initializer and Constant node output, by tensor name. */
  constDims: Map<string, number[]>;
}

const toNum = (v: unknown): number =>
  typeof v === "number" ? v : v && typeof v === "object" && "toNumber" in v ? (v as { toNumber(): number }).toNumber() : Number(v);

function valueOf(vi: onnxProto.onnx.IValueInfoProto): OnnxValue {
  const tt = vi.type?.tensorType;
  const elem = tt?.elemType ?? 0;
  const shape = tt?.shape;
  const dims = shape
    ? (shape.dim ?? []).map((d) => (d.dimParam ? d.dimParam : d.dimValue != null && toNum(d.dimValue) > 0 ? toNum(d.dimValue) : undefined))
    : null;
  return { name: vi.name ?? "", dtype: DTYPES[elem] ?? null, elemTypeName: DT[elem] ?? String(elem), dims };
}

/** Reads `file`; throws naming the file when it is not an ONNX model. */
export function readOnnxIo(file: string): OnnxIo {
  let model: onnxProto.onnx.ModelProto;
  try {
    model = onnx.ModelProto.decode(readFileSync(file));
  } catch (e) {
    throw new Error(`${file}: not a readable ONNX model (${(e as Error).message})`, { cause: e });
  }
  // Decoded messages carry every repeated field (protobufjs fills defaults).
  const g = model.graph as onnxProto.onnx.GraphProto | null | undefined;
  if (!g || g.output.length === 0) throw new Error(`${file}: not a valid ONNX model (no graph with outputs)`);
  const constDims = new Map<string, number[]>();
  for (const t of g.initializer as onnxProto.onnx.TensorProto[]) constDims.set(t.name, (t.dims ?? []).map(toNum));
  const nodes: OnnxNodeInfo[] = (g.node as onnxProto.onnx.NodeProto[]).map((n, i) => {
    const info: OnnxNodeInfo = { op: n.opType, name: n.name || `${n.opType}_${i}`, inputs: [...n.input], outputs: [...n.output] };
    for (const a of n.attribute as onnxProto.onnx.AttributeProto[]) {
      if (a.name === "axis" && a.i != null) info.axis = toNum(a.i);
      if (n.opType === "Constant" && a.name === "value" && a.t) constDims.set(n.output[0]!, (a.t.dims ?? []).map(toNum));
    }
    return info;
  });
  // Old exporters list initializers among the inputs too; those are weights, not inputs.
  const inputs = (g.input as onnxProto.onnx.ValueInfoProto[]).filter((vi) => !constDims.has(vi.name)).map(valueOf);
  return { file, inputs, outputs: (g.output as onnxProto.onnx.ValueInfoProto[]).map(valueOf), nodes, constDims };
}
