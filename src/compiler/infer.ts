/**
 * One pass in topological order that folds constants, removes Identity/Dropout, infers
 * every activation's shape (batch = -1) and resolves each op's attributes for the plan.
 */
import { CompileError } from "./errors.ts";
import { foldNode } from "./fold.ts";
import { type ConstTensor, type Graph, type LNode, BATCH, fmtShape } from "./ir.ts";
import { type Lowering, type OpCtx, shapeError } from "./op-ctx.ts";
import * as conv from "./ops-conv.ts";
import * as t from "./ops-tensor.ts";
import { TRANSFORMER_LOWERINGS } from "./ops-transformer.ts";
import { unsupportedOp } from "./supported.ts";

const LOWERINGS: Record<string, Lowering> = {
  Conv: conv.Conv, MaxPool: conv.MaxPool, AveragePool: conv.AveragePool,
  GlobalAveragePool: conv.GlobalAveragePool, BatchNormalization: conv.BatchNormalization,
  ReduceMean: conv.ReduceMean,
  Gemm: t.Gemm, MatMul: t.MatMul, Add: t.Binary, Sub: t.Binary, Mul: t.Binary, Div: t.Binary,
  Relu: t.Unary, Sigmoid: t.Unary, Tanh: t.Unary, Erf: t.Unary, LeakyRelu: t.LeakyRelu,
  Gelu: t.Gelu, Flatten: t.Flatten, Reshape: t.Reshape, Transpose: t.Transpose,
  Concat: t.Concat, Softmax: t.Softmax,
  // Transformer ops (LayerNormalization, batched MatMul, float math, reductions): replaces
  // MatMul and ReduceMean above with lowerings that keep their old cases as fast paths.
  ...TRANSFORMER_LOWERINGS,
};

export interface Inferred {
  nodes: LNode[];
  shapes: Map<string, number[]>;
  consts: Map<string, ConstTensor>;
  inputs: string[];
  /** Graph outputs after alias resolution, and the ONNX names to show for them. */
  outputs: string[];
  outputNames: Map<string, string>;
  warnings: string[];
}

export function inferGraph(g: Graph): Inferred {
  const shapes = new Map<string, number[]>();
  const consts = new Map(g.consts);
  const alias = new Map<string, string>();
  const warnings: string[] = [];
  const resolve = (s: string): string => alias.get(s) ?? s;
  const onnxNames = new Set(g.nodes.flatMap((n) => [...n.inputs, ...n.outputs]));
  /** A tensor name used nowhere in the model or by an earlier rewrite. */
  const fresh = (base: string): string => {
    let name = base;
    for (let k = 1; consts.has(name) || shapes.has(name) || onnxNames.has(name); k++) name = `${base}_${k}`;
    onnxNames.add(name);
    return name;
  };

  let staticBatch: number | undefined;
  for (const inp of g.inputs) {
    if (inp.elemType !== 1) throw new CompileError(`${g.file}: graph input "${inp.name}" has element type ${inp.elemType}; plan v1 takes float32 inputs only`, "invalid-model", { input: inp.name });
    if (inp.dims.length < 1) throw new CompileError(`${g.file}: graph input "${inp.name}" has no shape; its first dimension must be the batch`, "shape", { input: inp.name });
    const rest = inp.dims.slice(1);
    const badAt = rest.findIndex((d) => typeof d !== "number");
    if (badAt >= 0) throw new CompileError(`${g.file}: graph input "${inp.name}" dimension ${badAt + 1} is "${rest[badAt] ?? "unknown"}"; only the first (batch) dimension may be symbolic`, "shape", { input: inp.name });
    if (typeof inp.dims[0] === "number") {
      staticBatch = inp.dims[0];
      warnings.push(`input "${inp.name}" has a fixed first dimension ${inp.dims[0]}; it is planned as the (variable) batch`);
    }
    shapes.set(inp.name, [BATCH, ...(rest as number[])]);
  }

  const nodes: LNode[] = [];
  for (const n of g.nodes) {
    const inputs = n.inputs.map(resolve);
    if (n.opType === "Identity" || n.opType === "Dropout") {
      if (n.outputs[1] && n.opType === "Dropout") throw unsupportedOp(g.file, n, "with a mask output is not supported");
      if (consts.has(inputs[0]!)) consts.set(n.outputs[0]!, consts.get(inputs[0]!)!);
      else alias.set(n.outputs[0]!, inputs[0]!);
      continue;
    }
    const ins = inputs.map((s) => (s ? consts.get(s) : undefined));
    const runtime = inputs.find((s) => s && !consts.has(s));
    if (n.opType === "Shape" && runtime) {
      // The batch becomes NaN so that it folds symbolically (see ir.ts).
      const s = shapes.get(runtime)!.map((d) => (d === BATCH ? NaN : d));
      ins[0] = { isFloat: false, dims: s, data: new Float64Array(0) };
    } else if (runtime === undefined) {
      const r = foldNode(n, ins, g.opset);
      if (!r) throw unsupportedOp(g.file, n, "has only constant inputs but the compiler cannot evaluate it");
      r.forEach((c, i) => n.outputs[i] && consts.set(n.outputs[i]!, c));
      continue;
    } else if (!LOWERINGS[n.opType]) {
      throw unsupportedOp(g.file, n, `computes on the run-time tensor "${runtime}" and can only be folded at compile time`);
    }
    if (n.opType === "Shape") {
      const r = foldNode(n, ins, g.opset)!;
      consts.set(n.outputs[0]!, r[0]!);
      continue;
    }
    const ctx: OpCtx = {
      file: g.file,
      node: { ...n, inputs },
      opset: g.opset,
      staticBatch,
      act(i) {
        const name = inputs[i];
        if (!name) throw shapeError(ctx, `input ${i} is required`);
        if (consts.has(name)) throw shapeError(ctx, `input ${i} ("${name}") is a constant; memlane-rt expects a computed tensor with the batch here`);
        return shapes.get(name)!;
      },
      weight: (i) => (inputs[i] ? consts.get(inputs[i]!) : undefined),
      addConst(base, tensor) {
        const name = fresh(base);
        consts.set(name, tensor);
        return name;
      },
      warn: (m) => warnings.push(m),
    };
    const low = LOWERINGS[n.opType]!(ctx);
    const outputs = n.outputs.slice(0, low.shapes.length);
    if (low.then) outputs[0] = fresh(`${outputs[0]}.pre`);
    low.shapes.forEach((s, i) => outputs[i] && shapes.set(outputs[i]!, s));
    nodes.push({ op: low.op ?? n.opType, name: n.name, inputs: low.inputs ?? inputs, outputs, attrs: low.attrs });
    if (low.then) {
      shapes.set(n.outputs[0]!, low.then.shape);
      nodes.push({ op: low.then.op, name: `${n.name}.${low.then.op.toLowerCase()}`, inputs: [outputs[0]!], outputs: [n.outputs[0]!], attrs: low.then.attrs });
    }
  }

  const outputNames = new Map<string, string>();
  const outputs = g.outputs.map((o) => {
    const r = resolve(o);
    if (consts.has(r)) throw new CompileError(`${g.file}: graph output "${o}" is a constant; a plan's outputs must be computed`, "invalid-model", { output: o });
    if (g.inputs.some((i) => i.name === r)) throw new CompileError(`${g.file}: graph output "${o}" is the graph input "${r}" passed through; nothing to compute`, "invalid-model", { output: o });
    if (!shapes.has(r)) throw new CompileError(`${g.file}: graph output "${o}" is not produced by any node`, "invalid-model", { output: o });
    if (r !== o) outputNames.set(r, o);
    return r;
  });
  for (const s of shapes.values()) if (s.some((d, i) => i > 0 && !(d > 0))) throw new CompileError(`${g.file}: inferred an invalid shape ${fmtShape(s)}`, "internal");
  return { nodes, shapes, consts, inputs: g.inputs.map((i) => i.name), outputs, outputNames, warnings };
}
