/**
 * One pass in topological order that folds constants, removes Identity/Dropout, infers
 * every activation's shape (batch = -1) and resolves each op's attributes for the plan.
 */
import { attrInt } from "./attrs.ts";
import { CompileError } from "./errors.ts";
import { foldNode } from "./fold.ts";
import { dtypeOfOnnx, resolveInputs } from "./graph-inputs.ts";
import { type ConstTensor, type DType, type Graph, type LNode, type Node, BATCH, SYM_BATCH, batchAxis, defaultDtype, fmtShape, perSample } from "./ir.ts";
import { type Lowered, type Lowering, type OpCtx, shapeError } from "./op-ctx.ts";
import { castConst } from "./fold-math.ts";
import * as conv from "./ops-conv.ts";
import * as data from "./ops-data.ts";
import * as layout from "./ops-layout.ts";
import * as cnn from "./ops-cnn.ts";
import { CumSum, GatherElements } from "./ops-cumsum-gather-elements.ts";
import { GatherND, MinMax } from "./ops-gather-nd.ts";
import { ACTIVATION_LOWERINGS } from "./ops-activation.ts";
import { ConvTranspose } from "./ops-conv-transpose.ts";
import { ArgMax } from "./ops-argmax.ts";
import { TopK } from "./ops-topk.ts";
import { Einsum } from "./ops-einsum.ts";
import { GRU, LSTM } from "./ops-lstm.ts";
import { Resize } from "./ops-resize.ts";
import * as t from "./ops-tensor.ts";
import { TRANSFORMER_LOWERINGS } from "./ops-transformer.ts";
import { unsupportedOp } from "./supported.ts";

/** The compiler's shape rule of each op it runs (the estimate's replay of ORT wraps some: ort-shapes-quantized.ts). */
export const LOWERINGS: Readonly<Record<string, Lowering>> = {
  Conv: conv.Conv, ConvTranspose, MaxPool: conv.MaxPool, AveragePool: conv.AveragePool,
  GlobalAveragePool: conv.GlobalAveragePool, GlobalMaxPool: conv.GlobalMaxPool, BatchNormalization: conv.BatchNormalization,
  ReduceMean: conv.ReduceMean,
  Gemm: t.Gemm, MatMul: t.MatMul, Add: data.Binary, Sub: data.Binary, Mul: data.Binary, Div: data.Binary,
  Relu: t.Unary, Sigmoid: t.Unary, Tanh: t.Unary, Erf: t.Unary, LeakyRelu: t.LeakyRelu,
  Gelu: t.Gelu, Flatten: t.Flatten, Reshape: layout.Reshape, Transpose: t.Transpose,
  Concat: cnn.Concat, Softmax: t.Softmax, LogSoftmax: t.Softmax,
  Gather: data.Gather, Cast: data.Cast, Where: data.Where, Equal: data.Compare, Less: data.Compare,
  Greater: data.Compare, LessOrEqual: data.Compare, GreaterOrEqual: data.Compare, Not: data.Not, And: data.Logic, Or: data.Logic, Mod: data.Mod,
  Expand: layout.Expand, Unsqueeze: layout.Unsqueeze, Squeeze: layout.Squeeze, Slice: layout.Slice,
  Range: layout.Range, ConstantOfShape: layout.ConstantOfShape,
  Clip: cnn.Clip, HardSigmoid: cnn.HardSigmoid, HardSwish: cnn.HardSwish, Pad: cnn.Pad, Split: cnn.Split, LSTM, GRU,
  Max: MinMax, Min: MinMax, GatherND, CumSum, GatherElements, Resize, Upsample: Resize,
  Einsum, Tile: layout.Tile, InstanceNormalization: conv.InstanceNormalization, ArgMax, TopK,
  DepthToSpace: layout.DepthToSpace, SpaceToDepth: layout.SpaceToDepth, OneHot: layout.OneHot,
  // Elu, Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu, trigonometry, PRelu.
  ...ACTIVATION_LOWERINGS,
  // Transformer ops (LayerNormalization, batched MatMul, float math, reductions): replaces
  // MatMul and ReduceMean above with lowerings that keep their old cases as fast paths.
  ...TRANSFORMER_LOWERINGS,
};

/**
 * Ops whose result's shape is a constant input's values (index of that input, -1 = any):
 * with a batch-dependent value there they cannot fold (the result would hold k·batch
 * elements) and run as plan ops instead.
 */
const SHAPE_CONSUMERS: Record<string, number> = { ConstantOfShape: 0, Expand: 1, Range: -1, Reshape: 1, Tile: 1 };

/** Ops whose folded result has input 0's element type: they pick, move or join its values. */
const MOVES_VALUES: ReadonlySet<string> = new Set(["Gather", "GatherElements", "GatherND", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Expand", "Tile", "Concat", "Split", "Pad"]);

/**
 * Inputs whose values a folded op's output carries, where not all of them: only these can pass
 * the batch on (`sym`). The others give its shape or pick: a decoder's causal mask
 * (ConstantOfShape of its lengths filled with -inf, then Trilu by past + 1) holds no batch,
 * though both inputs came from Shape; marked, its -inf read as a batch multiple.
 */
const VALUE_INPUTS: Record<string, readonly number[]> = { ConstantOfShape: [], EyeLike: [], Trilu: [0], Expand: [0], Tile: [0], Where: [1, 2] };

function holdsBatch(c: ConstTensor | undefined): boolean {
  return !!c?.sym && Array.from(c.data).some((v) => Math.abs(v) >= 2 ** 31);
}

/**
 * The node without its empty inputs when it is a Concat (concatenating nothing adds nothing);
 * any other op reading an empty tensor is refused. The node's inputs are already resolved.
 */
function dropEmptyConcatInputs(n: Node, empties: ReadonlyMap<string, number[]>, file: string): Node {
  const empty = n.inputs.filter((i) => empties.has(i));
  if (empty.length === 0) return n;
  if (n.opType !== "Concat") {
    throw new CompileError(`${file}: ${n.opType} node "${n.name}": input "${empty[0]}" is empty (${fmtShape(empties.get(empty[0]!)!)}); memlane-rt keeps no empty tensors, and only a Concat may read one (it leaves it out)`, "shape", { node: n.name, opType: n.opType });
  }
  const rest = n.inputs.filter((i) => !empties.has(i));
  if (rest.length === 0) throw new CompileError(`${file}: Concat node "${n.name}": every input is empty`, "shape", { node: n.name, opType: n.opType });
  return { ...n, inputs: rest };
}

/** Ops whose folded output is decided by their inputs' values alone (an If condition's chain). */
const BOOLEAN_OPS = new Set(["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Cast", "Identity", "Squeeze", "Unsqueeze", "Reshape"]);

export interface InferOptions {
  /** Full model shapes, -1 at the batch axis (compileOnnx's `inputShapes`). */
  inputShapes?: Record<string, number[]>;
  /**
   * Shape rules that replace the compiler's for these op types: memlane estimate's replay of
   * ONNX Runtime (estimate/ort-pattern.ts) follows ORT's graph, where an op the compiler
   * rewrites first (a layout 0 LSTM) runs as it is. Not for plans.
   */
  lowerings?: Readonly<Record<string, Lowering>>;
  /**
   * Keep each op the compiler rewrites into several (Lowered.expand: Einsum, Tile,
   * InstanceNormalization; before / then / chain: a 1-D Conv between Reshapes, Resize as
   * MatMuls, ReduceL2 as Pow, ReduceSum, Sqrt) as the one node it is, with the rewrite's output
   * shape: ONNX Runtime runs them as one kernel, so the replay must not see the rewrite's
   * intermediates (wav2vec2's 1-D convs would each add a [N, 512, 3199] copy). Not for plans.
   */
  keepRewrittenOps?: boolean;
  /**
   * Keep computed values without the batch (a dynamically quantized MatMul's input scale,
   * computed from the data): ONNX Runtime allocates them at a size no batch changes. Plans
   * refuse them (every plan tensor scales with the batch). Not for plans.
   */
  batchlessValues?: boolean;
  /**
   * Take float16 graph inputs: a half-precision model's, whose graph ONNX Runtime's CPU runs in
   * float32 between a Cast of each input and of each output (estimate/ort-fp16.ts). Plans
   * refuse float16 (build.ts). Not for plans.
   */
  float16Values?: boolean;
  /**
   * Let an op memlane-rt runs only on [batch, ...] take any multiple of the batch first
   * (TimeSformer folds its frames into the batch, [4·batch, 3, H, W], for its patch Conv):
   * ONNX Runtime's kernels take any leading size, and the output keeps it. Plans refuse it
   * (memlane-rt splits a request by the batch along axis 0). Not for plans.
   */
  batchMultipleFirst?: boolean;
}

export interface Inferred {
  nodes: LNode[];
  shapes: Map<string, number[]>;
  dtypes: Map<string, DType>;
  consts: Map<string, ConstTensor>;
  inputs: string[];
  /** Graph outputs after alias resolution, and the ONNX names to show for them. */
  outputs: string[];
  outputNames: Map<string, string>;
  warnings: string[];
  /**
   * A constant a lowering made from an input constant (LayerNormalization's `w.ln`, a cast's
   * `w.int64`) -> the file's constant it came from: ONNX Runtime reads that one itself (the
   * estimate's replay finds a quantized model's weights by it).
   */
  derivedFrom: Map<string, string>;
}

export function inferGraph(g: Graph, opts: InferOptions = {}): Inferred {
  const shapes = new Map<string, number[]>();
  const dtypes = new Map<string, DType>();
  const consts = new Map(g.consts);
  const alias = new Map<string, string>();
  const warnings: string[] = [];
  const derivedFrom = new Map<string, string>();
  const resolve = (s: string): string => alias.get(s) ?? s;
  const onnxNames = new Set(g.nodes.flatMap((n) => [...n.inputs, ...n.outputs]));
  /** A tensor name used nowhere in the model or by an earlier rewrite. */
  const fresh = (base: string): string => {
    let name = base;
    for (let k = 1; consts.has(name) || shapes.has(name) || onnxNames.has(name); k++) name = `${base}_${k}`;
    onnxNames.add(name);
    return name;
  };

  const lowering = (op: string): Lowering | undefined => opts.lowerings?.[op] ?? LOWERINGS[op];
  const ins0 = resolveInputs(g, opts.inputShapes ?? {}, (m) => warnings.push(m), opts.float16Values === true);
  let staticBatch: number | undefined;
  for (const inp of ins0) {
    const onnxDims = g.inputs.find((i) => i.name === inp.name)!.dims;
    const first = onnxDims[batchAxis(inp.shape)];
    if (typeof first === "number") staticBatch = first;
    shapes.set(inp.name, inp.shape);
    dtypes.set(inp.name, inp.dtype);
  }

  const nodes: LNode[] = [];
  /** Tensors with no elements (Lowered.empty), by name: their shapes, for the error messages. */
  const empties = new Map<string, number[]>();
  // A work list, not the graph's node list: a lowering's `expand` splices its nodes in after
  // the one it replaces, and they are lowered next.
  const work = [...g.nodes];
  /** keepRewrittenOps: rewrites in progress, the nodes they pushed from `from` on to collapse into `node`. */
  const rewrites: { from: number; output: string; node: LNode }[] = [];
  const collapseFinished = () => {
    for (let r = rewrites[rewrites.length - 1]; r && nodes[nodes.length - 1]?.outputs.includes(r.output); r = rewrites[rewrites.length - 1]) {
      nodes.splice(r.from);
      nodes.push(r.node);
      rewrites.pop();
    }
  };
  // Whether a folded boolean's value turns on the batch: a comparison or logic op over a value
  // that holds a batch multiple (Equal(batch, 1) folds false, but a batch of 1 is true).
  const producerOf = new Map<string, Node>();
  const batchDecides = (name: string, depth = 0): boolean => {
    const c = consts.get(name);
    if (!c || depth > 32) return true;
    if (Array.from(c.data).some((v) => Math.abs(v) >= 2 ** 31)) return true;
    const p = producerOf.get(name);
    if (!p || !BOOLEAN_OPS.has(p.opType)) return false;
    return p.inputs.some((i) => i !== "" && batchDecides(resolve(i), depth + 1));
  };
  for (let at = 0; at < work.length; at++) {
    for (const o of work[at]!.outputs) if (o) producerOf.set(o, work[at]!);
    collapseFinished();
    const n0 = work[at]!;
    const n = dropEmptyConcatInputs({ ...n0, inputs: n0.inputs.map(resolve) }, empties, g.file);
    const inputs = n.inputs;
    // ONNX Runtime copies a Concat of one input (a DenseNet's first layer) into a tensor of its own.
    if (n.opType === "Concat" && inputs.length === 1 && !(opts.keepRewrittenOps && n0.inputs.length === 1)) {
      // What is left of a Concat whose other inputs were empty is its one input.
      if (consts.has(inputs[0]!)) consts.set(n.outputs[0]!, consts.get(inputs[0]!)!);
      else alias.set(n.outputs[0]!, inputs[0]!);
      continue;
    }
    // A Cast of a computed tensor to the dtype it already has is an Identity too (transformers'
    // legacy ViT export casts the attention probabilities float32 -> float32 twice, which
    // would otherwise keep the attention chain from fusing).
    const sameTypeCast = n.opType === "Cast" && !!inputs[0] && !consts.has(inputs[0]) &&
      dtypes.get(inputs[0]) === dtypeOfOnnx(attrInt(n, "to", 1));
    if (n.opType === "Identity" || n.opType === "Dropout" || sameTypeCast) {
      if (n.outputs[1] && n.opType === "Dropout") throw unsupportedOp(g.file, n, "with a mask output is not supported");
      if (consts.has(inputs[0]!)) consts.set(n.outputs[0]!, consts.get(inputs[0]!)!);
      else alias.set(n.outputs[0]!, inputs[0]!);
      continue;
    }
    // An If whose condition the shapes decide (torch's Squeeze of a dim whose size it did not know
    // at export: If(size == 1, Squeeze, Identity); its LocalResponseNorm's rank test) is the
    // branch it takes, inlined: the branch's nodes read the outer values, its outputs renamed to
    // the If's. A condition known only at run time stays refused below.
    const cond = n.opType === "If" && inputs[0] ? consts.get(inputs[0]) : undefined;
    if (cond && cond.data.length === 1 && n.branches && !batchDecides(inputs[0]!)) {
      const branch = n.branches[cond.data[0] ? "then_branch" : "else_branch"];
      if (!branch || branch.outputs.length < n.outputs.filter(Boolean).length) throw unsupportedOp(g.file, n, "has no branch for its condition");
      const rename = new Map(branch.outputs.map((o, i) => [o, n.outputs[i] ? n.outputs[i]! : o]));
      for (const [name, t] of branch.consts) consts.set(name, t);
      const inlined = branch.nodes.map((b, i) => ({ ...b, name: `${n.name}/${b.name || i}`, outputs: b.outputs.map((o) => rename.get(o) ?? o) }));
      // A branch output that is an outer value or a branch initializer as it is: an Identity of it.
      for (const [from, to] of rename) if (from !== to && !inlined.some((b) => b.outputs.includes(to))) inlined.push({ opType: "Identity", name: `${n.name}/${to}`, inputs: [from], outputs: [to], attrs: new Map() });
      work.splice(at + 1, 0, ...inlined);
      continue;
    }
    const ins = inputs.map((s) => (s ? consts.get(s) : undefined));
    const runtime = inputs.find((s) => s && !consts.has(s));
    const consumer = SHAPE_CONSUMERS[n.opType];
    const symbolicShape = consumer !== undefined && (consumer < 0 ? ins.some(holdsBatch) : holdsBatch(ins[consumer]));
    if (n.opType === "Size" && runtime) {
      // numel of a run-time tensor = perSample × batch: linear in the batch.
      consts.set(n.outputs[0]!, { isFloat: false, dims: [], data: Float64Array.of(perSample(shapes.get(runtime)!) * SYM_BATCH), sym: true, dtype: "int64" });
      continue;
    }
    if (n.opType === "Shape" && runtime) {
      // The batch folds as SYM_BATCH (k·batch as k·SYM_BATCH; see ir.ts).
      const s = shapes.get(runtime)!.map((d) => (d < 0 ? -d * SYM_BATCH : d));
      ins[0] = { isFloat: false, dims: s, data: new Float64Array(0), sym: true };
    } else if (runtime === undefined && !symbolicShape) {
      const r = foldNode(n, ins, g.opset);
      if (!r) throw unsupportedOp(g.file, n, "has only constant inputs but the compiler cannot evaluate it");
      const sym = (VALUE_INPUTS[n.opType]?.map((i) => ins[i]) ?? ins).some((c) => c?.sym);
      const x = ins[0];
      r.forEach((c, i) => {
        if (sym) c.sym = true;
        if (!c.dtype && x?.dtype && c.isFloat === x.isFloat) c.dtype = x.dtype;
        // A value picked or moved from an 8-bit table keeps its file type (the estimate's bytes of it).
        if (c.fileType === undefined && x?.fileType !== undefined && !c.dtype && c.isFloat === x.isFloat && MOVES_VALUES.has(n.opType)) c.fileType = x.fileType;
        if (n.outputs[i]) consts.set(n.outputs[i]!, c);
      });
      continue;
    } else if (!lowering(n.opType)) {
      // The estimate's replay of ONNX Runtime (its own lowerings) meets an op it has no shape rule for.
      if (opts.lowerings) throw new CompileError(`${g.file}: op ${n.domain ? `${n.domain}::` : ""}${n.opType} (node "${n.name}") has no shape rule in the estimate's replay of ONNX Runtime`, "unsupported-op", { opType: n.opType, node: n.name });
      throw unsupportedOp(g.file, n, runtime ? `computes on the run-time tensor "${runtime}" and can only be folded at compile time` : "depends on the batch size and can only be folded at compile time");
    }
    if (n.opType === "Shape") {
      const r = foldNode(n, ins, g.opset)!;
      r[0]!.sym = true;
      consts.set(n.outputs[0]!, r[0]!);
      continue;
    }
    const nameOf = (i: number) => {
      const name = inputs[i];
      if (!name) throw shapeError(ctx, `input ${i} is required`);
      return name;
    };
    const ctx: OpCtx = {
      file: g.file,
      node: { ...n, inputs },
      opset: g.opset,
      staticBatch,
      act(i) {
        const s = ctx.actAny(i);
        const dt = dtypes.get(nameOf(i));
        if (dt !== "float32") throw shapeError(ctx, `input ${i} ("${nameOf(i)}") is ${dt}; this op computes on float32 only`);
        if (batchAxis(s) !== 0 || (s[0] !== BATCH && !opts.batchMultipleFirst)) throw shapeError(ctx, `input ${i} ("${nameOf(i)}") has shape ${fmtShape(s)}; this op needs the batch as its first dimension`);
        return s;
      },
      actAny(i) {
        const name = nameOf(i);
        if (consts.has(name)) throw shapeError(ctx, `input ${i} ("${name}") is a constant; memlane-rt expects a computed tensor with the batch here`);
        return shapes.get(name)!;
      },
      dtype(i) {
        const name = inputs[i];
        if (!name) return undefined;
        const c = consts.get(name);
        return c ? defaultDtype(c) : dtypes.get(name);
      },
      constAs(i, dtype) {
        const name = nameOf(i);
        const c = consts.get(name)!;
        if (defaultDtype(c) === dtype) return name;
        return ctx.addConst(`${name}.${dtype}`, castConst(c, dtype));
      },
      weight: (i) => (inputs[i] ? consts.get(inputs[i]!) : undefined),
      addConst(base, tensor) {
        const name = fresh(base);
        // Lowerings name what they derive from input i `${input i}.<what>` (constAs, a
        // LayerNormalization's full weight): the longest input name that prefixes `base`.
        const from = inputs.filter((i) => i && consts.has(i) && base.startsWith(`${i}.`)).sort((a, b) => b.length - a.length)[0];
        if (from) derivedFrom.set(name, derivedFrom.get(from) ?? from);
        consts.set(name, tensor);
        return name;
      },
      freshName: fresh,
      warn: (m) => warnings.push(m),
    };
    const low = lowering(n.opType)!(ctx);
    if (low.empty) {
      empties.set(n.outputs[0]!, low.shapes[0]!);
      continue;
    }
    if (low.expand) {
      if (opts.keepRewrittenOps) rewrites.push({ from: nodes.length, output: n.outputs[0]!, node: { op: n.opType, name: n.name, inputs, outputs: [n.outputs[0]!], attrs: {} } });
      work.splice(at + 1, 0, ...low.expand);
      continue;
    }
    const outputs = n.outputs.slice(0, low.shapes.length);
    const post: NonNullable<Lowered["chain"]> = low.chain ?? (low.then ? [low.then] : []);
    if (opts.keepRewrittenOps && (low.before || post.length > 0)) {
      // ORT runs the node as it is (a 1-D Conv, a Resize, a ReduceL2): one output, no Reshapes
      // or MatMuls around it, with the shape the rewrite ends at.
      const last = post.length > 0 ? post[post.length - 1]!.shape : low.shapes[0]!;
      shapes.set(n.outputs[0]!, last);
      dtypes.set(n.outputs[0]!, low.dtypes?.[0] ?? "float32");
      nodes.push({ op: n.opType, name: n.name, inputs, outputs: [n.outputs[0]!], attrs: low.attrs });
      continue;
    }
    if (post.length > 0) outputs[0] = fresh(`${outputs[0]}.pre`);
    low.shapes.forEach((s, i) => {
      if (!outputs[i]) return;
      shapes.set(outputs[i]!, s);
      dtypes.set(outputs[i]!, low.dtypes?.[i] ?? "float32");
    });
    const opInputs = [...(low.inputs ?? inputs)];
    if (low.before) {
      const moved = fresh(`${opInputs[0]}.${low.before.op.toLowerCase()}`);
      shapes.set(moved, low.before.shape);
      dtypes.set(moved, dtypes.get(opInputs[0]!) ?? "float32");
      nodes.push({ op: low.before.op, name: `${n.name}.before.${low.before.op.toLowerCase()}`, inputs: [opInputs[0]!], outputs: [moved], attrs: low.before.attrs });
      opInputs[0] = moved;
    }
    nodes.push({ op: low.op ?? n.opType, name: n.name, inputs: opInputs, outputs, attrs: low.attrs });
    let prev = outputs[0]!;
    post.forEach((p, i) => {
      const out = i === post.length - 1 ? n.outputs[0]! : fresh(`${n.outputs[0]}.${i + 1}`);
      shapes.set(out, p.shape);
      dtypes.set(out, low.dtypes?.[0] ?? "float32");
      const name = post.length === 1 ? `${n.name}.${p.op.toLowerCase()}` : `${n.name}.${i + 1}.${p.op.toLowerCase()}`;
      nodes.push({ op: p.op, name, inputs: [prev, ...(p.inputs ?? [])], outputs: [out], attrs: p.attrs });
      prev = out;
    });
  }

  collapseFinished();
  const outputNames = new Map<string, string>();
  const outputs = g.outputs.map((o) => {
    const r = resolve(o);
    if (consts.has(r)) throw new CompileError(`${g.file}: graph output "${o}" is a constant; a plan's outputs must be computed`, "invalid-model", { output: o });
    if (g.inputs.some((i) => i.name === r)) throw new CompileError(`${g.file}: graph output "${o}" is the graph input "${r}" passed through; nothing to compute`, "invalid-model", { output: o });
    if (!shapes.has(r)) throw new CompileError(`${g.file}: graph output "${o}" is not produced by any node`, "invalid-model", { output: o });
    const s = shapes.get(r)!;
    if (!s.includes(BATCH)) throw new CompileError(`${g.file}: graph output "${o}" has shape ${fmtShape(s)}; a plan output needs one plain batch dimension`, "shape", { output: o });
    if (r !== o) outputNames.set(r, o);
    return r;
  });
  for (const [name, s] of shapes) {
    // Every computed tensor scales linearly with the batch (docs/plan-format.md, "Batch scaling").
    const batchless = opts.batchlessValues && s.every((d) => d > 0 && Number.isInteger(d));
    if (!batchless && (s.filter((d) => d < 0).length !== 1 || s.some((d) => d === 0 || !Number.isInteger(d)))) {
      throw new CompileError(`${g.file}: tensor "${name}" has shape ${fmtShape(s)}; every computed tensor needs exactly one batch dimension (k·batch) and no empty dimension`, "shape", { tensor: name });
    }
  }
  return { nodes, shapes, dtypes, consts, inputs: ins0.map((i) => i.name), outputs, outputNames, warnings, derivedFrom };
}
