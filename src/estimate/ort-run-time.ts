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
    const foldable = NONDETERMINISTIC.has(n.opType)
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
      bytes.set(o, numel(c.dims) * DTYPE_BYTES[defaultDtype(c)]);
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
