/**
 * ORT's NoopElimination (onnxruntime/core/optimizer/noop_elimination.cc, a rule of its level-1
 * rewrites, so every level the ORT runtimes run): an Add or Sub of zero, or a Mul or Div by one,
 * goes, and its readers take its other input. The node's tensor never exists, and the chain
 * around it stays whole for the later fusions: a Conv's Add reads the Conv's output again
 * (ort-fusions.ts CONV_SUM), and the NCHWc rewrite (ort-nchwc.ts) keeps the chain blocked.
 *
 * timm's MobileOne, exported unreparameterized, starts each block's sum with `scale + 0` (the
 * branch a block lacks is a Python 0): 13 Adds of a constant zero, each between a Conv sum
 * and the next, so the replay reordered every block out of NCHWc and back. ORT 1.32's
 * optimized graph keeps none; the replay's pattern was 4.59 MiB a sample where ORT asks for
 * 2.87 (ort_pattern_size.py), and python-ort's steady RSS at compare's defaults +56 %.
 *
 * The rule, as ORT states it: exactly one input is a constant initializer (a Constant node is
 * one to ORT), the second for Sub and Div; it holds at most one element, of a float or integer
 * type, and its rank is at most the other input's (whose rank must be known); its value is 0
 * for Add and Sub, 1 for Mul and Div (compared as a float, so -0 is zero); the output is no
 * graph output.
 */
import type { ConstTensor, LNode } from "../compiler/ir.ts";

const NEUTRAL: Record<string, number> = { Add: 0, Sub: 0, Mul: 1, Div: 1 };
/** The element types ORT reads the value of (TensorProto FLOAT, INT32, INT64, FLOAT16, DOUBLE); others stay. */
const VALUE_TYPES = new Set([1, 6, 7, 10, 11]);
const VALUE_DTYPES = new Set(["float32", "int32", "int64", "float16"]);
/** Only the first input may be the constant of these (x - 0 and x / 1, never 0 - x or 1 / x). */
const CONSTANT_SECOND_ONLY = new Set(["Sub", "Div"]);

export interface NoopValues {
  /** A constant's value (an initializer or a Constant node's), undefined for a computed tensor. */
  constOf(name: string): ConstTensor | undefined;
  /** A computed tensor's rank where ORT's shape inference knows it. */
  rankOf(name: string): number | undefined;
}

/**
 * The nodes without ORT's no-op arithmetic, their readers given its other input; `renamed`: a
 * reader as it was -> as it is now (a new node, for those that track nodes by identity).
 */
export function ortNoopElimination(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, values: NoopValues): { nodes: LNode[]; renamed: Map<LNode, LNode> } {
  const replacedBy = new Map<string, string>();
  const resolve = (name: string) => replacedBy.get(name) ?? name;
  const out: LNode[] = [];
  const renamed = new Map<LNode, LNode>();
  for (const n0 of nodes) {
    const n = n0.inputs.some((i) => replacedBy.has(i)) ? { ...n0, inputs: n0.inputs.map(resolve) } : n0;
    if (n !== n0) renamed.set(n0, n);
    const kept = noopInput(n, graphOutputs, values);
    if (kept === null) out.push(n);
    else replacedBy.set(n.outputs[0]!, kept);
  }
  return { nodes: out, renamed };
}

/** The input that `n`'s readers take where ORT removes it, else null. */
function noopInput(n: LNode, graphOutputs: ReadonlySet<string>, values: NoopValues): string | null {
  const neutral = NEUTRAL[n.op];
  const [a, b] = n.inputs;
  const y = n.outputs[0];
  if (neutral === undefined || n.inputs.length !== 2 || n.outputs.length !== 1 || !a || !b || !y || graphOutputs.has(y)) return null;
  const ca = values.constOf(a);
  const cb = values.constOf(b);
  if (!ca === !cb) return null;
  if (ca && CONSTANT_SECOND_ONLY.has(n.op)) return null;
  const [c, other] = ca ? [ca, b] : [cb!, a];
  const otherRank = values.rankOf(other);
  if (otherRank === undefined || c.dims.length > otherRank) return null;
  const size = c.dims.reduce((p, d) => p * d, 1);
  if (size > 1) return null;
  if (size === 0) return other;
  if (c.fileType !== undefined ? !VALUE_TYPES.has(c.fileType) : !VALUE_DTYPES.has(c.dtype ?? (c.isFloat ? "float32" : "int64"))) return null;
  // Its float value (an integer's too): 0 and -0 alike.
  return c.data[0] === neutral ? other : null;
}
