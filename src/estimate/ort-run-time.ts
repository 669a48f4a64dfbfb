/**
 * Values ONNX Runtime computes at run time that memlane's compiler folds (ort-pattern.ts takes
 * them into its trace, at a size that does not grow with the batch).
 *
 * ORT's constant folding (onnxruntime/core/optimizer/constant_folding.cc) folds a node when
 * every input is an initializer or an output it folded before, and a Shape (or Size) only when
 * its input's shape is fully known when the session is made. With the batch symbolic, the shape
 * of a graph input is not, so everything computed from it runs in every request and takes its
 * tensors from the arena. memlane's compiler knows every dim but the batch and folds all of it
 * that does not depend on the batch.
 *
 * BEiT (transformers, legacy export) builds its relative-position index from the image's patch
 * grid, `Shape(pixel_values)[2:]`: Range, Expand, ScatterND and Concat over [196, 196, ...] int64
 * tensors and the Gather of the bias table, 3.0 MiB at every batch size. ORT's arena took a
 * pattern block of 4,919,808 B at batch 1 where the replay without these took 1,746,304 (with
 * them 4,509,312, and ORT's regions). At batch 8 ORT's block (18.0 MB) still outgrows the
 * replay's (14.8): docs/memory.md, "What ORT computes at run time that the compiler folds".
 */
import type { ConstTensor, Graph, LNode, Node } from "../compiler/ir.ts";
import { DTYPE_BYTES, defaultDtype, numel } from "../compiler/ir.ts";
import { fileElemBytes } from "../compiler/tensor-data.ts";
import { isOrtInsertedCast } from "./ort-fp16.ts";

/** Ops ORT never folds: their outputs differ from run to run. */
const NONDETERMINISTIC = new Set(["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"]);

export interface RunTimeFolds {
  /** The ONNX nodes ORT runs that memlane folded, as plan nodes (the file's op and attributes). */
  nodes: LNode[];
  /** Their outputs' bytes (they do not depend on the batch). */
  bytes: Map<string, number>;
}

/**
 * The nodes of `sorted` (g's nodes, producers first) whose outputs the compiler folded
 * (`folded`) but ORT computes in every request. `shapeOf`: the compiler's shape of a value
 * (a negative dim is the batch), to tell which Shape nodes ORT folds.
 */
export function ortRunTimeFolds(g: Pick<Graph, "consts" | "outputs" | "inputs" | "declaredShapes">, sorted: readonly Node[], folded: ReadonlyMap<string, ConstTensor>, shapeOf: (name: string) => readonly number[] | undefined): RunTimeFolds {
  const ortConst = new Set<string>(g.consts.keys());
  const numeric = (dims: readonly (number | string | undefined)[] | undefined) => dims !== undefined && dims.length > 0 && dims.every((d) => typeof d === "number");
  const inputDims = new Map(g.inputs.map((i) => [i.name, i.dims]));
  // The compiler infers with every symbolic dim but the batch set to the benchmark's value (a
  // sequence of 128), so a shape it infers without the batch is one ORT knows only where the
  // graph's inputs have no other symbolic dim.
  const compilerShapesStatic = g.inputs.every((i) => i.dims.filter((d) => typeof d !== "number").length <= 1);
  // A shape ORT knows when it makes the session: a graph input's, all numbers; one the file
  // declares all in numbers; or, as above, one the compiler infers without the batch.
  const known = (x: string) => {
    if (inputDims.has(x)) return numeric(inputDims.get(x));
    if (numeric(g.declaredShapes?.get(x))) return true;
    const s = shapeOf(x);
    return compilerShapesStatic && s !== undefined && s.every((d) => d >= 0);
  };
  const nodes: LNode[] = [];
  const bytes = new Map<string, number>();
  const graphOutputs = new Set(g.outputs);
  for (const n of sorted) {
    const ins = n.inputs.filter(Boolean);
    const foldable = NONDETERMINISTIC.has(n.opType) || isOrtInsertedCast(n)
      ? false
      : n.opType === "Shape" || n.opType === "Size"
        ? ins.every((x) => ortConst.has(x) || known(x))
        : ins.length > 0
          ? ins.every((x) => ortConst.has(x))
          : n.opType === "Constant";
    const outs = n.outputs.filter(Boolean);
    if (foldable) {
      for (const o of outs) ortConst.add(o);
      continue;
    }
    if (outs.length === 0 || !outs.every((o) => folded.has(o) && !graphOutputs.has(o))) continue;
    for (const o of outs) {
      const c = folded.get(o)!;
      // A value of an 8-bit table (a dynamically quantized MPNet's relative-position bias) takes a byte an element.
      bytes.set(o, numel(c.dims) * (c.fileType !== undefined ? fileElemBytes(c) : DTYPE_BYTES[defaultDtype(c)]));
    }
    nodes.push({ op: n.opType, name: n.name, inputs: [...n.inputs], outputs: [...n.outputs], attrs: plainAttrs(n) });
  }
  return { nodes, bytes };
}

/** A node's attributes as a plain object (what ORT's common subexpression pass compares). */
function plainAttrs(n: Node): LNode["attrs"] {
  const out: LNode["attrs"] = {};
  for (const [k, v] of n.attrs) {
    if (typeof v === "number" || typeof v === "string") out[k] = v;
    else if (Array.isArray(v)) out[k] = v.every((x) => typeof x === "number") ? (v as number[]) : v.join(",");
    else out[k] = `tensor [${v.dims.join(",")}] ${Array.from(v.data).join(",")}`;
  }
  return out;
}

/**
 * `lowered` with each node reading again the run-time values its ONNX node reads (a Reshape's
 * shape, an Expand's, a Slice's ends) that the compiler folded into an attribute. ORT keeps
 * such a value from the node that computes it to the last node that reads it: the Concat of a
 * SegFormer attention's output shape is computed before its K and V projections and read by
 * the Reshape after them. Small as they are, those blocks decide where ORT's planner puts the
 * large ones: traced through malloc (arena and pattern off), ORT's large tensors on SegFormer had
 * the replay's sizes, order and frees, and only these 64-byte blocks differed. Without the reads
 * the replay freed each shape value where it was made; with them (and ort-order.ts
 * ortOrderOfFinalGraph) PoolFormer's pattern went from 8.3 % under ORT's block to exact.
 */
export function withRunTimeReads(lowered: readonly LNode[], sorted: readonly Node[], runTime: RunTimeFolds): LNode[] {
  // By the ONNX node's first output, which the lowered node that stands for it writes.
  const reads = new Map<string, string[]>();
  for (const n of sorted) {
    const r = n.inputs.filter((x) => x && runTime.bytes.has(x));
    if (r.length > 0 && n.outputs[0]) reads.set(n.outputs[0], r);
  }
  return lowered.map((n) => {
    const missing = n.outputs.flatMap((o) => reads.get(o) ?? []).filter((x) => !n.inputs.includes(x));
    return missing.length > 0 ? { ...n, inputs: [...n.inputs, ...missing] } : n;
  });
}

/**
 * Ops whose output shape ONNX shape inference gives from the shapes of their inputs alone (and
 * of those inputs listed in VALUE_INPUTS, their values as constants), not their values: what ORT's
 * planner knows of a run-time value before the first request. Its planner reuses a freed buffer
 * only for a value whose shape it knows and is not a scalar (ort-pattern.ts planBuffers), so a
 * Concat of a Reshape's target shape takes the buffer of an earlier one of the same length,
 * where a Range's or an Expand's output never shares one.
 */
const SHAPE_FROM_SHAPES = new Set([
  "Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Identity",
  "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Equal", "Less", "Greater", "Not", "And", "Or", "Where", "Min", "Max",
]);
/** The inputs (by position) of these ops whose values set the output's shape: they must be constants. */
const VALUE_INPUTS: Readonly<Record<string, readonly number[]>> = { Unsqueeze: [1], Squeeze: [1], Slice: [1, 2, 3, 4] };

/**
 * The run-time values (runTime.nodes' outputs) whose shapes ORT infers before the run:
 * computed by an op of SHAPE_FROM_SHAPES from constants, values of the graph (their shapes are
 * known: the batch is a symbol) and run-time values whose shapes it infers, with the inputs of
 * VALUE_INPUTS constants. `isOrtConst`: whether a value is a constant to ORT (an initializer, or
 * folded by its constant folding).
 */
export function runTimeShapesOrtInfers(runTime: RunTimeFolds, isOrtConst: (name: string) => boolean): Set<string> {
  const known = new Set<string>();
  for (const n of runTime.nodes) {
    if (!SHAPE_FROM_SHAPES.has(n.op)) continue;
    const valueInputs = VALUE_INPUTS[n.op] ?? [];
    const ok = n.inputs.every((x, i) => !x || (valueInputs.includes(i) ? isOrtConst(x) : isOrtConst(x) || !runTime.bytes.has(x) || known.has(x)));
    if (ok) for (const o of n.outputs) if (o) known.add(o);
  }
  return known;
}
