/** The op vocabulary of plan format v1 (docs/plan-format.md, "Ops and their attributes"). */
import { CompileError } from "./errors.ts";
import type { Node } from "./ir.ts";

/** Ops memlane-rt computes; exactly the table in docs/plan-format.md. */
export const SUPPORTED_OPS: readonly string[] = Object.freeze([
  "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf",
  "LeakyRelu", "Gelu", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape",
  "Transpose", "Concat", "Softmax",
  "Clip", "HardSigmoid", "HardSwish", "SiLU", "Pad", "Split", "LSTM",
]);

/** Ops the compiler removes or rewrites into supported ones. */
export const REWRITTEN_OPS: readonly string[] = Object.freeze(["BatchNormalization", "Identity", "Dropout", "ReduceMean"]);

/**
 * Ops accepted only when all their inputs are known at compile time (the shape arithmetic
 * exporters emit around Reshape/Flatten, and constant subgraphs); fold.ts evaluates them.
 */
export const FOLD_ONLY_OPS: readonly string[] = Object.freeze([
  "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Cast", "Slice", "ConstantOfShape",
  "Range", "Equal", "Less", "Greater", "Not", "Where", "Expand", "Neg", "Sqrt", "Exp", "Log",
  "Abs", "Reciprocal", "Pow", "Min", "Max", "Floor", "Ceil", "Size", "CastLike",
]);

export function supportedListText(): string {
  return `${SUPPORTED_OPS.join(", ")} (plus ${REWRITTEN_OPS.join(", ")}, which the compiler rewrites, and constant subgraphs of ${FOLD_ONLY_OPS.join(", ")}, which it folds)`;
}

export function unsupportedOp(file: string, n: Node, why = "is not supported"): CompileError {
  return new CompileError(
    `${file}: op ${n.opType} (node "${n.name}") ${why}; memlane-rt supports: ${supportedListText()}`,
    "unsupported-op",
    { opType: n.opType, node: n.name, supported: [...SUPPORTED_OPS] },
  );
}

/** Fail fast, before any shape work, on ops that can never compile. */
export function checkVocabulary(file: string, nodes: readonly Node[]): void {
  for (const n of nodes) {
    if (!SUPPORTED_OPS.includes(n.opType) && !REWRITTEN_OPS.includes(n.opType) && !FOLD_ONLY_OPS.includes(n.opType)) {
      throw unsupportedOp(file, n);
    }
  }
}
