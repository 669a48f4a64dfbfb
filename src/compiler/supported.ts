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
]);

/** Ops the compiler removes or rewrites into supported ones. */
export const REWRITTEN_OPS: readonly string[] = Object.freeze(["BatchNormalization", "Identity", "Dropout"]);

/**
 * Ops accepted only when all their inputs are known at compile time (the shape arithmetic
 * exporters emit around Reshape/Flatten, and constant subgraphs); fold.ts evaluates them.
 */
export const FOLD_ONLY_OPS: readonly string[] = Object.freeze([
  "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Cast", "Slice", "ConstantOfShape",
  "Range", "Equal", "Less", "Greater", "Not", "Where", "Expand",
  "Min", "Max", "Floor", "Ceil", "Size", "CastLike",
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

/**
 * Fail fast, before any shape work, on ops that can never compile, listing every such op type
 * at once (count and first node) so one compile tells the whole story of a model.
 */
export function checkVocabulary(file: string, nodes: readonly Node[]): void {
  const bad = new Map<string, { count: number; node: Node }>();
  for (const n of nodes) {
    if (!SUPPORTED_OPS.includes(n.opType) && !REWRITTEN_OPS.includes(n.opType) && !FOLD_ONLY_OPS.includes(n.opType)) {
      const seen = bad.get(n.opType);
      if (seen) seen.count++;
      else bad.set(n.opType, { count: 1, node: n });
    }
  }
  if (bad.size === 0) return;
  const list = [...bad.entries()];
  const [, first] = list[0]!;
  if (list.length === 1 && first.count === 1) throw unsupportedOp(file, first.node);
  const text = list.map(([op, b]) => `${op} ×${b.count} (first node "${b.node.name}")`).join(", ");
  throw new CompileError(
    `${file}: ${list.length} unsupported op type(s): ${text}; first: op ${first.node.opType} (node "${first.node.name}"); memlane-rt supports: ${supportedListText()}`,
    "unsupported-op",
    { opType: first.node.opType, node: first.node.name, unsupported: list.map(([op, b]) => ({ opType: op, count: b.count, node: b.node.name })), supported: [...SUPPORTED_OPS] },
  );
}
