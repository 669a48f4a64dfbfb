/**
 * The float activations and trigonometry memlane-rt runs as elementwise math (ops-activation.ts:
 * Elu, Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu, Tan ... Atanh) and PRelu, built as
 * ONNX graphs with their attributes set and at their defaults, inputs scaled into each op's
 * domain (and far out, where a naive Softplus overflows), compiled, run through memlane-rt over
 * real ZeroMQ at batches 1 and 3 and compared with ONNX Runtime on the same graph; and
 * LogSoftmax. The same ops as torch exports them run in native-cnn-ops.test.ts
 * (activations-block).
 */
import { type GraphCase, describeGraphCases } from "../fixtures/graph-vs-ort.ts";
import { type Attr, type Init, type NodeSpec, init, node, values } from "../unit/compiler-onnx-builder.ts";

interface Case {
  /** The op, its attributes, and what x (uniform in [-1, 1)) is mapped to first. */
  op: string;
  attrs?: Record<string, Attr>;
  pre?: "scale" | "wide" | "unit" | "above-one";
  /** PRelu's slope. */
  slope?: Init;
}

const CASES: Record<string, Case> = {
  "Elu at its default alpha": { op: "Elu", pre: "scale" },
  "Elu, alpha 0.3": { op: "Elu", attrs: { alpha: { f: 0.3 } }, pre: "scale" },
  "Selu at its defaults": { op: "Selu", pre: "scale" },
  "Selu, alpha 2 and gamma 0.5": { op: "Selu", attrs: { alpha: { f: 2 }, gamma: { f: 0.5 } }, pre: "scale" },
  "Celu, alpha 1.5": { op: "Celu", attrs: { alpha: { f: 1.5 } }, pre: "scale" },
  "Celu at its default alpha": { op: "Celu", pre: "scale" },
  "ThresholdedRelu, alpha 0.5": { op: "ThresholdedRelu", attrs: { alpha: { f: 0.5 } }, pre: "scale" },
  "Softplus": { op: "Softplus", pre: "scale" },
  "Softplus far out (exp overflows float)": { op: "Softplus", pre: "wide" },
  "Softsign": { op: "Softsign", pre: "wide" },
  "Mish (opset 18)": { op: "Mish", pre: "scale" },
  "Mish far out": { op: "Mish", pre: "wide" },
  "Tan": { op: "Tan", pre: "unit" },
  "Asin": { op: "Asin", pre: "unit" },
  "Acos (YOSO)": { op: "Acos", pre: "unit" },
  "Atan": { op: "Atan", pre: "wide" },
  "Sinh": { op: "Sinh", pre: "scale" },
  "Cosh": { op: "Cosh", pre: "scale" },
  "Asinh": { op: "Asinh", pre: "wide" },
  "Acosh": { op: "Acosh", pre: "above-one" },
  "Atanh": { op: "Atanh", pre: "unit" },
  "PRelu per channel": { op: "PRelu", pre: "scale", slope: init("slope", [4, 1, 1], [0.25, -0.5, 0, 1.5]) },
  "PRelu, one slope": { op: "PRelu", pre: "scale", slope: init("slope", [1], [0.1]) },
  "PRelu per position of the last axis": { op: "PRelu", pre: "scale", slope: init("slope", [5], [0.1, 0.2, 0.3, 0.4, 0.5]) },
};

/** What `pre` maps x to, for a constant input (the folded case). */
function mapped(pre: Case["pre"], v: number): number {
  return pre === "wide" ? v * 100 : pre === "unit" ? v * 0.95 : pre === "above-one" ? 1 + Math.abs(v) * 3 : v * 4;
}

/** Nodes mapping the graph input x to "p", the op's input. */
function preNodes(pre: Case["pre"]): { nodes: NodeSpec[]; inits: Init[] } {
  const k = (v: number) => init("k", [1], [v]);
  switch (pre) {
    case "wide": return { nodes: [node("Mul", ["x", "k"], ["p"])], inits: [k(100)] };
    // |p| < 0.95: inside Asin, Acos, Atanh, and Tan away from its poles.
    case "unit": return { nodes: [node("Mul", ["x", "k"], ["p"])], inits: [k(0.95)] };
    case "above-one": return { nodes: [node("Abs", ["x"], ["a"]), node("Mul", ["a", "k"], ["m"]), node("Add", ["m", "one"], ["p"])], inits: [k(3), init("one", [1], [1])] };
    default: return { nodes: [node("Mul", ["x", "k"], ["p"])], inits: [k(4)] };
  }
}

/**
 * Run time: the op reads an activation (x mapped into its domain). Folded: it reads a constant,
 * which the compiler evaluates (ops-activation.ts activationFn, prelu), so the plan holds no
 * such op and only adds the result to x.
 */
function graphCase(c: Case, folded: boolean): GraphCase {
  const inputs = c.slope ? ["p", "slope"] : ["p"];
  const slope = c.slope ? [c.slope] : [];
  const op = node(c.op, inputs, [folded ? "f" : "y"], c.attrs ?? {});
  if (folded) {
    return {
      inputs: [["x", ["N", 4, 3, 5]]], opset: 18, ops: { [c.op]: 0 },
      nodes: [op, node("Add", ["x", "f"], ["y"])],
      inits: [init("p", [4, 3, 5], values(60, 11).map((v) => mapped(c.pre, v))), ...slope],
    };
  }
  const pre = preNodes(c.pre);
  return { inputs: [["x", ["N", 4, 3, 5]]], opset: 18, ops: { [c.op]: 1 }, nodes: [...pre.nodes, op], inits: [...pre.inits, ...slope] };
}

/** LogSoftmax, the head of nets trained with NLLLoss (logits scaled to +-50: exp would overflow unshifted). */
const logSoftmax = (dims: (number | string)[], attrs: Record<string, Attr>, opset = 17): GraphCase => ({
  inputs: [["x", dims]], opset, ops: { LogSoftmax: 1 }, inits: [init("k", [1], [50])],
  nodes: [node("Mul", ["x", "k"], ["p"]), node("LogSoftmax", ["p"], ["y"], attrs)],
});
const LOG_SOFTMAX: Record<string, GraphCase> = {
  "LogSoftmax of a classifier's logits": logSoftmax(["N", 10], { axis: 1 }),
  "LogSoftmax over a middle axis": logSoftmax(["N", 5, 3], { axis: 1 }),
  "LogSoftmax at opset 11, last axis by default": logSoftmax(["N", 7], {}, 11),
};

const CASES_BOTH_WAYS: Record<string, GraphCase> = Object.fromEntries(
  Object.entries(CASES).flatMap(([name, c]) => [[`${name} (run time)`, graphCase(c, false)], [`${name} (folded)`, graphCase(c, true)]]),
);

describeGraphCases("native-activations", "the float activations, PRelu and LogSoftmax on memlane-rt match ONNX Runtime", { ...CASES_BOTH_WAYS, ...LOG_SOFTMAX });
