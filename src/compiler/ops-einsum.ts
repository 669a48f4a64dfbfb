/**
 * Einsum with one or two operands, rewritten into ONNX nodes the compiler already lowers
 * (Lowered.expand): ReduceSum for labels only one operand has, Transposes that bring each
 * operand to [batch labels, free labels, contracted labels], Reshapes that merge each group
 * into one axis where it has several, one MatMul, and the Reshape and Transpose back to the
 * equation's output order. What the models write is batched products (maxvit_t's
 * "bghid,bghjd->bghij", "bij,bjk->bik", "...ij,...jk->...ik") and projections by a weight
 * ("bsh,hd->bsd"); both become the MatMul they are, and the constant side's Transposes and
 * Reshapes fold. Repeated labels in one term (diagonals, traces) and three or more operands
 * are refused by name.
 */
import { attrString } from "./attrs.ts";
import { type Node, fmtShape, mergedDim } from "./ir.ts";
import { type Lowering, type OpCtx, addInts, shapeError } from "./op-ctx.ts";

/** One operand: its labels in axis order and its dims (-k at the batch axis). */
interface Term {
  name: string;
  labels: string[];
  dims: number[];
  isConst: boolean;
}

/**
 * Terms and output labels of an equation. "..." becomes labels ".0", ".1", ... aligned to the
 * right across operands (numpy broadcasting); an implicit output is the ellipsis, then the
 * letters seen exactly once, in alphabetical order (the ONNX rule).
 */
export function parseEquation(equation: string, ranks: number[]): { terms: string[][]; out: string[] } | string {
  const eq = equation.replace(/\s+/g, "");
  const [lhs, rhs] = eq.split("->") as [string, string | undefined];
  const raw = lhs.split(",");
  if (raw.length !== ranks.length) return `the equation has ${raw.length} operand terms for ${ranks.length} inputs`;
  const letters = (t: string) => t.replace("...", "");
  const bad = [...raw, rhs ?? ""].find((t) => !/^[A-Za-z]*$/.test(letters(t)) || t.split("...").length > 2);
  if (bad !== undefined) return `term "${bad}" is not letters with at most one "..."`;
  const ell = raw.map((t, i) => (t.includes("...") ? ranks[i]! - letters(t).length : 0));
  if (ell.some((e, i) => e < 0 || (!raw[i]!.includes("...") && letters(raw[i]!).length !== ranks[i]))) {
    return `the terms ${raw.map((t) => `"${t}"`).join(", ")} do not match the input ranks ${ranks.join(", ")}`;
  }
  const width = Math.max(0, ...ell);
  const ellLabels = (n: number) => Array.from({ length: n }, (_, i) => `.${width - n + i}`);
  const expand = (t: string, n: number): string[] => {
    const [pre, post] = t.includes("...") ? (t.split("...") as [string, string]) : [t, undefined];
    return post === undefined ? [...pre] : [...pre, ...ellLabels(n), ...post];
  };
  const terms = raw.map((t, i) => expand(t, ell[i]!));
  let out: string[];
  if (rhs === undefined) {
    const count = new Map<string, number>();
    for (const l of terms.flat()) if (!l.startsWith(".")) count.set(l, (count.get(l) ?? 0) + 1);
    out = [...ellLabels(width), ...[...count].filter(([, n]) => n === 1).map(([l]) => l).sort()];
  } else {
    if (rhs.includes("...") ? false : ell.some((e) => e > 0)) return `the output "${rhs}" drops the "..." axes the operands have`;
    out = expand(rhs, width);
  }
  for (const t of [...terms, out]) {
    const dup = t.find((l, i) => t.indexOf(l) !== i);
    if (dup) return `label "${dup}" repeats within one term (a diagonal or trace), which is not supported`;
  }
  const seen = new Set(terms.flat());
  const stray = out.find((l) => !seen.has(l));
  if (stray) return `output label "${stray}" is in no operand`;
  return { terms, out };
}

/** Builds the replacement nodes, tracking each intermediate's labels and dims. */
class Emitter {
  nodes: Node[] = [];
  constructor(private c: OpCtx) {}

  private node(op: string, inputs: string[], base: string, attrs: Node["attrs"] = new Map()): string {
    const out = this.c.freshName(`${this.c.node.outputs[0]}.einsum.${base}`);
    this.nodes.push({ opType: op, name: `${this.c.node.name}.${this.nodes.length}.${op.toLowerCase()}`, inputs, outputs: [out], attrs });
    return out;
  }

  private ints(base: string, values: number[]): string {
    return addInts(this.c, `${this.c.node.name}.${base}`, values);
  }

  /** Sums the axes at `axes` away (keepdims 0). */
  reduceSum(t: Term, axes: number[]): Term {
    if (axes.length === 0) return t;
    const attrs: Node["attrs"] = new Map([["keepdims", 0]]);
    const inputs = [t.name];
    // ReduceSum takes its axes as an input from opset 13 and as an attribute before.
    if (this.c.opset >= 13) inputs.push(this.ints("axes", axes));
    else attrs.set("axes", axes);
    const keep = (_: unknown, i: number) => !axes.includes(i);
    return { name: this.node("ReduceSum", inputs, "sum", attrs), labels: t.labels.filter(keep), dims: t.dims.filter(keep), isConst: t.isConst };
  }

  /** Reorders the axes to `labels` (a permutation of t's). */
  transpose(t: Term, labels: string[]): Term {
    const perm = labels.map((l) => t.labels.indexOf(l));
    if (perm.every((p, i) => p === i)) return t;
    const name = this.node("Transpose", [t.name], "transpose", new Map([["perm", perm]]));
    return { name, labels, dims: perm.map((p) => t.dims[p]!), isConst: t.isConst };
  }

  /** A reshape to `dims` under new labels (merged groups get made-up ones). */
  reshape(t: Term, labels: string[], dims: number[]): Term {
    if (dims.length === t.dims.length && dims.every((d, i) => d === t.dims[i])) return { ...t, labels };
    // The batch's entry is -1, which Reshape infers as k·batch: the only unknown extent.
    const shape = this.ints("shape", dims.map((d) => (d < 0 ? -1 : d)));
    return { name: this.node("Reshape", [t.name, shape], "reshape"), labels, dims, isConst: t.isConst };
  }

  matmul(a: Term, b: Term, labels: string[], dims: number[]): Term {
    return { name: this.node("MatMul", [a.name, b.name], "matmul"), labels, dims, isConst: false };
  }

  /** Renames the last node's output to the Einsum's own. */
  finish(t: Term): Node[] {
    const last = this.nodes[this.nodes.length - 1];
    if (!last || last.outputs[0] !== t.name) {
      // Nothing to compute beyond renaming: an Identity-like Reshape to the same shape.
      this.reshape({ ...t, dims: [] }, t.labels, t.dims);
    }
    this.nodes[this.nodes.length - 1]!.outputs[0] = this.c.node.outputs[0]!;
    return this.nodes;
  }
}

function termOf(c: OpCtx, i: number, labels: string[]): Term {
  const w = c.weight(i);
  if (c.dtype(i) !== "float32") throw shapeError(c, `input ${i} ("${c.node.inputs[i]}") is ${c.dtype(i)}; Einsum computes on float32 only`);
  return { name: c.node.inputs[i]!, labels, dims: w ? [...w.dims] : c.actAny(i), isConst: !!w };
}

export const Einsum: Lowering = (c) => {
  const n = c.node;
  if (n.inputs.length < 1 || n.inputs.length > 2) throw shapeError(c, `${n.inputs.length} operands: Einsum with one or two operands is supported`);
  const ranks = n.inputs.map((_, i) => (c.weight(i)?.dims ?? c.actAny(i)).length);
  const equation = attrString(n, "equation", "");
  const parsed = parseEquation(equation, ranks);
  if (typeof parsed === "string") throw shapeError(c, `equation "${equation}": ${parsed}`);
  const { terms, out } = parsed;
  const ops = terms.map((labels, i) => termOf(c, i, labels));
  const em = new Emitter(c);
  const batchLabel = (t: Term) => t.labels[t.dims.findIndex((d) => d < 0)];
  for (const t of ops) {
    const b = batchLabel(t);
    if (b !== undefined && !out.includes(b)) throw shapeError(c, `equation "${equation}" sums over the batch axis of ${fmtShape(t.dims)}; the batch must stay in the output`);
  }
  // Each label's extent, checked across operands (1 broadcasts against anything under "...").
  const extent = new Map<string, number>();
  for (const t of ops) {
    t.labels.forEach((l, i) => {
      const d = t.dims[i]!, e = extent.get(l);
      if (e === undefined || e === 1) extent.set(l, d);
      else if (d !== e && d !== 1) throw shapeError(c, `label "${l}" is ${d} in one operand and ${e} in another`);
    });
  }
  if (ops.length === 1) {
    const t = em.reduceSum(ops[0]!, ops[0]!.labels.flatMap((l, i) => (out.includes(l) ? [] : [i])));
    return { shapes: [], attrs: {}, expand: em.finish(em.transpose(t, out)) };
  }
  // Labels only one operand has and the output lacks are summed first.
  const [a0, b0] = ops as [Term, Term];
  const sumAway = (t: Term, other: Term) => t.labels.flatMap((l, i) => (out.includes(l) || other.labels.includes(l) ? [] : [i]));
  let a = em.reduceSum(a0, sumAway(a0, b0));
  let b = em.reduceSum(b0, sumAway(b0, a0));
  if (a.isConst && b.isConst) throw shapeError(c, "both operands are constants");
  // The activation goes left: a MatMul by a constant takes its weight on the right.
  if (a.isConst) [a, b] = [b, a];
  const inA = new Set(a.labels), inB = new Set(b.labels);
  const contract = a.labels.filter((l) => inB.has(l) && !out.includes(l));
  let batch = a.labels.filter((l) => inB.has(l) && out.includes(l));
  let freeA = a.labels.filter((l) => !inB.has(l));
  const freeB = b.labels.filter((l) => !inA.has(l));
  const beta = batchLabel(a)!;
  if (!b.isConst && batchLabel(b) !== beta) {
    throw shapeError(c, `equation "${equation}" gives the two operands' batch axes different labels ("${beta}", "${batchLabel(b)}")`);
  }
  if (b.isConst && batch.length === 0) {
    // A [free..., K] by a 2-D weight [K, N]: the free axes stay as they are.
    const aT = em.transpose(a, [...freeA, ...contract]);
    const aM = em.reshape(aT, [...freeA, "#k"], [...freeA.map((l) => extent.get(l)!), mergedDim(contract.map((l) => extent.get(l)!))]);
    const bT = em.transpose(b, [...contract, ...freeB]);
    const bM = em.reshape(bT, ["#k", "#n"], [mergedDim(contract.map((l) => extent.get(l)!)), mergedDim(freeB.map((l) => extent.get(l)!))]);
    const nDim = bM.dims[1]!;
    const prodT = em.matmul(aM, bM, [...freeA, "#n"], [...aM.dims.slice(0, -1), nDim]);
    const split = em.reshape(prodT, [...freeA, ...freeB], [...freeA.map((l) => extent.get(l)!), ...freeB.map((l) => extent.get(l)!)]);
    return { shapes: [], attrs: {}, expand: em.finish(em.transpose(split, out)) };
  }
  // Batched: the batch label leads. When it is A's free label (B is then a constant, which has
  // no batch), it becomes a leading axis B broadcasts over with a 1 there.
  if (!batch.includes(beta)) {
    freeA = freeA.filter((l) => l !== beta);
    batch = [beta, ...batch];
  } else {
    batch = [beta, ...batch.filter((l) => l !== beta)];
  }
  const dimIn = (t: Term, l: string) => (t.labels.includes(l) ? t.dims[t.labels.indexOf(l)]! : 1);
  const group = (ls: string[]) => mergedDim(ls.map((l) => extent.get(l)!));
  const aT = em.transpose(a, [...batch.filter((l) => inA.has(l)), ...freeA, ...contract]);
  const aM = em.reshape(aT, [...batch, "#m", "#k"], [...batch.map((l) => dimIn(a, l)), group(freeA), group(contract)]);
  const bLead = batch.filter((l) => inB.has(l));
  const bT = em.transpose(b, [...bLead, ...contract, ...freeB]);
  const bM = em.reshape(bT, [...batch, "#k", "#n"], [...batch.map((l) => dimIn(b, l)), group(contract), group(freeB)]);
  const leadDims = batch.map((l) => extent.get(l)!);
  const prodT = em.matmul(aM, bM, [...batch, "#m", "#n"], [...leadDims, group(freeA), group(freeB)]);
  const split = em.reshape(prodT, [...batch, ...freeA, ...freeB], [...leadDims, ...freeA.map((l) => extent.get(l)!), ...freeB.map((l) => extent.get(l)!)]);
  return { shapes: [], attrs: {}, expand: em.finish(em.transpose(split, out)) };
};
