/**
 * ONNX file -> Graph: decode the protobuf, pick the default-domain opset, decode attributes
 * and initializers (raw_data, typed fields, external data files next to the model).
 */
import { readFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import onnxProto from "onnx-proto";
import { CompileError } from "./errors.ts";
import type { Graph, GraphInput, Node, NodeAttr, SubGraph } from "./ir.ts";
import { decodeTensor, toNum } from "./tensor-data.ts";

const { onnx } = onnxProto;
type ModelProto = onnxProto.onnx.ModelProto;

/**
 * How a node from a domain other than ONNX's own is taken: "refuse" (the compiler: memlane-rt
 * runs ONNX ops only) or "keep" (the estimate's replay of ONNX Runtime, which runs its own
 * com.microsoft ops: a quantized model's QLinearAdd and QGemm).
 */
export interface LoadOptions {
  customDomains?: "refuse" | "keep";
}

export function loadOnnx(path: string, opts: LoadOptions = {}): Graph {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new CompileError(`${path}: cannot read ONNX model: ${(e as Error).message}`, "unreadable-model", { path }, { cause: e });
  }
  let model: ModelProto;
  try {
    model = onnx.ModelProto.decode(bytes);
  } catch (e) {
    throw new CompileError(`${path}: not a valid ONNX model (protobuf decode failed: ${(e as Error).message})`, "unreadable-model", { path }, { cause: e });
  }
  // A random or truncated file sometimes decodes "successfully" into an empty message.
  const graph = model.graph as onnxProto.onnx.GraphProto | null | undefined;
  if (!graph || (graph.node.length === 0 && graph.output.length === 0)) {
    throw new CompileError(`${path}: not a valid ONNX model (no graph with nodes and outputs)`, "unreadable-model", { path });
  }
  return graphFromModel(model, path, opts);
}

export function graphFromModel(model: ModelProto, path: string, opts: LoadOptions = {}): Graph {
  // Decoded messages carry every repeated/scalar field (protobufjs fills defaults).
  const g = model.graph as onnxProto.onnx.GraphProto;
  const file = basename(path);
  const modelDir = dirname(path);
  let opset = 0;
  for (const o of model.opsetImport) {
    if (!o.domain || o.domain === "ai.onnx") opset = toNum(o.version);
  }
  if (opset === 0) throw new CompileError(`${path}: the model imports no default-domain (ai.onnx) opset`, "invalid-model", { path });

  const consts = new Map<string, import("./ir.ts").ConstTensor>();
  for (const t of g.initializer as onnxProto.onnx.TensorProto[]) consts.set(t.name, decodeTensor(t, modelDir, path));

  const dimsOf = (vi: onnxProto.onnx.ValueInfoProto) =>
    (vi.type?.tensorType?.shape?.dim ?? []).map((d) => (d.dimParam ? d.dimParam : d.dimValue != null && toNum(d.dimValue) > 0 ? toNum(d.dimValue) : d.dimParam || undefined));
  const inputs: GraphInput[] = [];
  for (const vi of g.input as onnxProto.onnx.ValueInfoProto[]) {
    // Old exporters list initializers among the inputs too; those are weights, not inputs.
    if (consts.has(vi.name)) continue;
    inputs.push({ name: vi.name, dims: dimsOf(vi), elemType: vi.type?.tensorType?.elemType ?? 0 });
  }
  // A declared shape counts only where the file gives one (a value_info without a shape says nothing).
  const declared = ((g.valueInfo ?? []) as onnxProto.onnx.ValueInfoProto[]).filter((vi) => vi.type?.tensorType?.shape);
  const declaredShapes = declared.length > 0 ? new Map(declared.map((vi) => [vi.name, dimsOf(vi)])) : undefined;

  const nodes = decodeNodes(g.node as onnxProto.onnx.NodeProto[], file, modelDir, path, opts);

  const outs = g.output as onnxProto.onnx.ValueInfoProto[];
  const outputElemTypes = new Map(outs.map((o) => [o.name, o.type?.tensorType?.elemType ?? 0]));
  return { file, opset, nodes, consts, inputs, outputs: outs.map((o) => o.name), outputElemTypes, ...(declaredShapes ? { declaredShapes } : {}) };
}

const AT = onnx.AttributeProto.AttributeType;

function decodeNodes(protos: onnxProto.onnx.NodeProto[], file: string, modelDir: string, path: string, opts: LoadOptions): Node[] {
  return protos.map((n, i) => {
    const custom = n.domain && n.domain !== "ai.onnx" ? n.domain : undefined;
    if (custom && opts.customDomains !== "keep") {
      throw new CompileError(
        `${file}: node "${n.name || `#${i}`}" uses op ${n.domain}::${n.opType} from a custom domain; only the default ONNX domain is supported`,
        "unsupported-op",
        { opType: n.opType, node: n.name, domain: n.domain },
      );
    }
    const attrs = new Map<string, NodeAttr>();
    const branches: Record<string, SubGraph> = {};
    for (const a of n.attribute as onnxProto.onnx.AttributeProto[]) {
      // An If's branches are kept: inference inlines the one a condition known at compile time
      // takes (torch's Squeeze of a dim whose size it did not know when it exported).
      if (a.type === AT.GRAPH && a.g) branches[a.name] = decodeSubGraph(a.g as onnxProto.onnx.GraphProto, file, modelDir, path, opts);
      else attrs.set(a.name, decodeAttr(a, modelDir, path));
    }
    return {
      opType: n.opType, name: n.name || `${n.opType}_${i}`, inputs: [...n.input], outputs: [...n.output], attrs,
      ...(custom ? { domain: custom } : {}), ...(Object.keys(branches).length > 0 ? { branches } : {}),
    };
  });
}

function decodeSubGraph(g: onnxProto.onnx.GraphProto, file: string, modelDir: string, path: string, opts: LoadOptions): SubGraph {
  const consts = new Map((g.initializer as onnxProto.onnx.TensorProto[]).map((t) => [t.name, decodeTensor(t, modelDir, path)]));
  return { nodes: decodeNodes(g.node as onnxProto.onnx.NodeProto[], file, modelDir, path, opts), outputs: (g.output as onnxProto.onnx.ValueInfoProto[]).map((o) => o.name), consts };
}

function decodeAttr(a: onnxProto.onnx.IAttributeProto, modelDir: string, path: string): NodeAttr {
  const dec = new TextDecoder();
  switch (a.type) {
    case AT.FLOAT:
      return a.f ?? 0;
    case AT.INT:
      return toNum(a.i ?? 0);
    case AT.STRING:
      return dec.decode(a.s ?? new Uint8Array());
    case AT.TENSOR:
      return decodeTensor(a.t!, modelDir, path);
    case AT.FLOATS:
      return [...(a.floats ?? [])];
    case AT.INTS:
      return (a.ints ?? []).map(toNum);
    case AT.STRINGS:
      return (a.strings ?? []).map((s) => dec.decode(s));
    default:
      // Graph attributes are decoded apart (decodeNodes: If's branches); a Loop's or Scan's body,
      // and sparse tensors, belong to ops both runtimes' compilers refuse.
      return [];
  }
}
