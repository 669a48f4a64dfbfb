/** The op vocabulary of plan format v1 (docs/plan-format.md, "Ops and their attributes"). */
import { CompileError } from "./errors.ts";
import type { Node } from "./ir.ts";

/**
 * Ops memlane-rt computes; exactly the table in docs/plan-format.md, less the ops only the
 * compiler's fusions produce (Attention), which are no ONNX op it accepts.
 */
export const SUPPORTED_OPS: readonly string[] = Object.freeze([
  "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf",
  "LeakyRelu", "Gelu", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape",
  "Transpose", "Concat", "Softmax",
  "LayerNormalization", "Pow", "Sqrt", "Reciprocal", "Exp", "Neg", "Log", "Abs",
  "ReduceMean", "ReduceSum", "ReduceMax",
  // plan v2 (planv2): run-time data of any dtype; folded instead when every input is constant
  "Gather", "Cast", "Where", "Equal", "Less", "Greater", "Not", "And", "Or", "Mod", "Expand", "Unsqueeze", "Squeeze", "Slice", "Range", "ConstantOfShape",
  "LessOrEqual", "GreaterOrEqual",
  "Clip", "HardSigmoid", "HardSwish", "SiLU", "Pad", "Split", "LSTM",
  "Max", "Min", "GatherND", "CumSum", "GatherElements",
  "Sin", "Cos", "ArgMax",
  "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "ThresholdedRelu",
  "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "PRelu",
  "ConvTranspose", "LogSoftmax", "GRU", "TopK",
]);

/** Ops the compiler removes or rewrites into supported ones. */
export const REWRITTEN_OPS: readonly string[] = Object.freeze([
  "BatchNormalization", "Identity", "Dropout", "IsNaN", "Resize", "Upsample", "ReduceL2", "ReduceSumSquare", "ReduceL1",
  "Einsum", "Tile", "InstanceNormalization", "DepthToSpace", "SpaceToDepth", "OneHot", "GlobalMaxPool",
]);

/**
 * Ops accepted only when all their inputs are known at compile time (the shape arithmetic
 * exporters emit around Reshape/Flatten, and constant subgraphs); fold.ts evaluates them.
 */
export const FOLD_ONLY_OPS: readonly string[] = Object.freeze([
  "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Cast", "Slice", "ConstantOfShape",
  "Range", "Equal", "Less", "Greater", "Not", "Where", "Expand",
  "Min", "Max", "Floor", "Ceil", "Size", "CastLike",
  // Swin's shifted-window attention mask (ScatterND), DeBERTa-v2's relative-position buckets
  // (Sign), BEiT's dynamo relative-position index (ScatterElements); fold.ts also evaluates
  // constant MatMul, Clip, LayerNormalization, BatchNormalization (BiT's weight standardisation,
  // training mode too), Tile, Resize, GatherND, GatherElements, Pad, Einsum and every Reduce* it
  // rewrites, which run as plan ops (or their rewrites) otherwise.
  // XLNet's identity mask (EyeLike), a decoder's causal mask over its lengths (Trilu); an If
  // whose condition the shapes decide, inlined as the branch it takes (infer.ts)
  "ScatterND", "Sign", "ScatterElements", "EyeLike", "Trilu", "If",
]);

export function supportedListText(): string {
  const foldOnly = FOLD_ONLY_OPS.filter((op) => !SUPPORTED_OPS.includes(op));
  return `${SUPPORTED_OPS.join(", ")} (plus ${REWRITTEN_OPS.join(", ")}, which the compiler rewrites, and constant subgraphs of ${foldOnly.join(", ")}, which it folds)`;
}

export function unsupportedOp(file: string, n: Node, why = "is not supported"): CompileError {
  return new CompileError(
    `${file}: op ${n.opType} (node "${n.name}") ${why}; memlane-rt supports: ${supportedListText()}`,
    "unsupported-op",
    { opType: n.opType, node: n.name, supported: [...SUPPORTED_OPS] },
  );
}

/** Ops whose output depends only on the shape of their input, never on its values. */
const SHAPE_ONLY: ReadonlySet<string> = new Set(["Shape", "Size"]);

/**
 * Tensors whose values are known only at run time: the graph inputs and everything computed
 * from their values (Shape and Size read only their shape).
 */
function runTimeTensors(nodes: readonly Node[], inputs: readonly string[]): Set<string> {
  const live = new Set(inputs);
  for (let changed = true; changed; ) {
    changed = false;
    for (const n of nodes) {
      if (SHAPE_ONLY.has(n.opType) || !n.inputs.some((i) => i && live.has(i))) continue;
      for (const o of n.outputs) if (o && !live.has(o)) changed = live.add(o) !== undefined;
    }
  }
  return live;
}

const NOT_SUPPORTED = "is not supported";

interface Blocker {
  op: string;
  count: number;
  node: string;
  why: string;
}

/**
 * Fail fast, before any shape work, on every op that can never compile, all named at once:
 * ops outside the vocabulary, and fold-only ops that compute on run-time data (`inputs`: the
 * graph inputs' names; without them only the vocabulary is checked). One entry per op type:
 * how many nodes, the first node.
 */
export function checkVocabulary(file: string, nodes: readonly Node[], inputs: readonly string[] = []): void {
  const runTime = runTimeTensors(nodes, inputs);
  const blockers = new Map<string, Blocker>();
  const block = (n: Node, why: string): void => {
    const key = `${n.opType}\u0000${why}`;
    const b = blockers.get(key);
    if (b) b.count++;
    else blockers.set(key, { op: n.opType, count: 1, node: n.name, why });
  };
  for (const n of nodes) {
    if (SUPPORTED_OPS.includes(n.opType) || REWRITTEN_OPS.includes(n.opType)) continue;
    if (!FOLD_ONLY_OPS.includes(n.opType)) block(n, NOT_SUPPORTED);
    else if (!SHAPE_ONLY.has(n.opType) && n.inputs.some((i) => i && runTime.has(i)))
      block(n, "computes on run-time data and can only be folded at compile time");
  }
  if (blockers.size === 0) return;
  const list = [...blockers.values()];
  const where = (b: Blocker) => (b.count === 1 ? `(node "${b.node}")` : `(${b.count} nodes, first "${b.node}")`);
  const text =
    list.length === 1
      ? `op ${list[0]!.op} ${where(list[0]!)} ${list[0]!.why}`
      : `${list.length} ops memlane-rt cannot run — ` +
        [...new Set(list.map((b) => b.why))].sort((a, b) => Number(b === NOT_SUPPORTED) - Number(a === NOT_SUPPORTED))
          .map((why) => `${why === NOT_SUPPORTED ? "not supported" : "computing on run-time data (fold-only)"}: ${list.filter((b) => b.why === why).map((b) => `${b.op} ${where(b)}`).join(", ")}`)
          .join("; ");
  throw new CompileError(
    `${file}: ${text}; memlane-rt supports: ${supportedListText()}`,
    "unsupported-op",
    {
      opType: list[0]!.op, node: list[0]!.node, supported: [...SUPPORTED_OPS],
      ops: list.map((b) => ({ opType: b.op, count: b.count, node: b.node, reason: b.why })),
    },
  );
}
