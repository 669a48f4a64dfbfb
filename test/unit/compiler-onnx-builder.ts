/** Build small ONNX models in TypeScript (onnx-proto) for compiler edge-case tests. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import onnxProto from "onnx-proto";
import { afterAll } from "vitest";

const { onnx } = onnxProto;
const AT = onnx.AttributeProto.AttributeType;

export type Attr = number | number[] | string | { f: number } | { floats: number[] } | { t: Init } | { graph: { nodes: NodeSpec[]; outputs: string[]; inits?: Init[] } };
export interface Init {
  name: string;
  dims: number[];
  data?: number[];
  /** "float" (default, raw_data), "float-typed" (float_data field), "int64", "bool", "uint8" or "int8" (a quantized model's zero points). */
  type?: "float" | "float-typed" | "int64" | "bool" | "uint8" | "int8";
  /** Store the data in an external file instead (the caller writes the file). */
  external?: { location: string; offset?: number; length?: number };
}
export interface NodeSpec {
  op: string;
  inputs: string[];
  outputs: string[];
  name?: string;
  attrs?: Record<string, Attr>;
}
export interface ModelSpec {
  /** name, dims, and the ONNX element type (default 1, float; 7 = int64, 9 = bool). */
  inputs: [string, (number | string)[], number?][];
  outputs: string[];
  nodes: NodeSpec[];
  inits?: Init[];
  opset?: number;
  /** ONNX element types of outputs that are not float (7 = int64, 9 = bool), by name. */
  outputTypes?: Record<string, number>;
  /** Declared shapes of intermediate values (graph.value_info): name, dims. */
  valueInfo?: [string, (number | string)[]][];
}

export function node(op: string, inputs: string[], outputs: string[], attrs?: Record<string, Attr>, name?: string): NodeSpec {
  return { op, inputs, outputs, attrs, name };
}

/** Deterministic pseudo-random values in [-1, 1). */
export function values(n: number, seed = 1): number[] {
  let s = seed;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return (s / 2147483648) * 2 - 1;
  });
}

export function init(name: string, dims: number[], data?: number[], type: Init["type"] = "float"): Init {
  return { name, dims, data: data ?? values(dims.reduce((a, b) => a * b, 1), name.length), type };
}

function tensor(t: Init): onnxProto.onnx.ITensorProto {
  const data = t.data ?? [];
  if (t.type === "int64") return { name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.INT64, int64Data: data };
  if (t.type === "bool") return { name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.BOOL, int32Data: data };
  if (t.type === "uint8") return { name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.UINT8, int32Data: data };
  if (t.type === "int8") return { name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.INT8, int32Data: data };
  if (t.external) {
    const e = t.external;
    const kv = [["location", e.location], ["offset", e.offset], ["length", e.length]].filter(([, v]) => v !== undefined);
    return {
      name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.FLOAT,
      dataLocation: onnx.TensorProto.DataLocation.EXTERNAL, externalData: kv.map(([key, value]) => ({ key: String(key), value: String(value) })),
    };
  }
  if (t.type === "float-typed") return { name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.FLOAT, floatData: data };
  const raw = new Uint8Array(Float32Array.from(data).buffer);
  return { name: t.name, dims: t.dims, dataType: onnx.TensorProto.DataType.FLOAT, rawData: raw };
}

function attr(name: string, v: Attr): onnxProto.onnx.IAttributeProto {
  if (typeof v === "number") return Number.isInteger(v) ? { name, type: AT.INT, i: v } : { name, type: AT.FLOAT, f: v };
  if (typeof v === "string") return { name, type: AT.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: AT.INTS, ints: v };
  if ("f" in v) return { name, type: AT.FLOAT, f: v.f };
  if ("floats" in v) return { name, type: AT.FLOATS, floats: v.floats };
  if ("graph" in v) {
    // A control-flow node's branch: its nodes read the outer graph's values by name.
    const g = v.graph;
    return {
      name, type: AT.GRAPH,
      g: { name, node: g.nodes.map(nodeProto), initializer: (g.inits ?? []).map(tensor), output: g.outputs.map((o) => valueInfo(o)) },
    };
  }
  return { name, type: AT.TENSOR, t: tensor(v.t) };
}

function nodeProto(n: NodeSpec, i: number): onnxProto.onnx.INodeProto {
  return {
    opType: n.op, name: n.name ?? `${n.op.toLowerCase()}_${i}`, input: n.inputs, output: n.outputs,
    attribute: Object.entries(n.attrs ?? {}).map(([k, v]) => attr(k, v)),
  };
}

function valueInfo(name: string, dims?: (number | string)[], elemType: number = onnx.TensorProto.DataType.FLOAT): onnxProto.onnx.IValueInfoProto {
  if (!dims) return { name, type: { tensorType: { elemType } } };
  const dim = dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d }));
  return { name, type: { tensorType: { elemType, shape: { dim } } } };
}

export function modelBytes(spec: ModelSpec): Uint8Array {
  const m = onnx.ModelProto.create({
    irVersion: 8,
    producerName: "memlane-test",
    opsetImport: [{ domain: "", version: spec.opset ?? 17 }],
    graph: {
      name: "g",
      node: spec.nodes.map(nodeProto),
      initializer: (spec.inits ?? []).map(tensor),
      input: spec.inputs.map(([n, d, t]) => valueInfo(n, d, t)),
      output: spec.outputs.map((o) => valueInfo(o, undefined, spec.outputTypes?.[o])),
      valueInfo: (spec.valueInfo ?? []).map(([n, d]) => valueInfo(n, d)),
    },
  });
  return onnx.ModelProto.encode(m).finish();
}

/** Temp dirs made for the test file that imported this module; removed after its last test. */
const made: string[] = [];
afterAll(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh temp dir, removed after the file's tests: callers write a model and a plan there. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "memlane-compiler-test-"));
  made.push(dir);
  return dir;
}

/** Write the model into a fresh temp dir; returns the .onnx path. */
export function writeModel(spec: ModelSpec, name = "model", dir = tempDir()): string {
  const p = join(dir, `${name}.onnx`);
  writeFileSync(p, modelBytes(spec));
  return p;
}
