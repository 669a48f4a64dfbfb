/**
 * What ONNX Runtime's CPU Einsum asks its arena for while it runs (einsum_utils: the compute
 * preprocessor and the typed compute processor), for the replay's kernel scratch
 * (ort-scratch.ts). Einsum computes by copies: each input is made to follow one axis order (the
 * order its letters are first seen in the equation), each pair of operands is transposed to
 * [shared, left only, contracted, right only] for a batched MatMul, whose result is a new
 * tensor, and the last one is transposed to the output's order before it is copied into the
 * op's output. Every copy comes from the arena, so a transformer written in einsums (XLNet's
 * relative attention: 'ibnd,jbnd->bnij' copies both operands and writes the scores twice) needs
 * room the memory pattern does not hold. Without it, XLNet's steady RSS at batches 1,8 was
 * estimated 6.8 % (python-ort) and 7.6 % (node-ort) under.
 *
 * Taken as ORT takes them: the preprocessed inputs, ReduceSums of axes only one operand has,
 * the pair's transposed operands and its MatMul result before the op's output; the result's
 * transpose to the output's order after it; freed when the kernel returns, but for a run of
 * more than two operands, whose pairs free their own copies and the result they replace as
 * they return.
 * An ellipsis' axes are taken as ORT numbers them, outermost. The equation is read by the
 * compiler's parser (ops-einsum.ts parseEquation). Not taken: a repeated letter within an
 * operand (ORT's diagonal), which that parser refuses: none.
 */
import { DTYPE_BYTES, type LNode, perSample } from "../compiler/ir.ts";
import { parseEquation } from "../compiler/ops-einsum.ts";
import type { KernelScratch, ValueInfo } from "./ort-scratch.ts";

/** An operand as the processor holds it: its dims in the common axis order, 1 where it has no such axis. */
interface Operand {
  dims: number[];
  /** Whether the pair being computed made it (a ReduceSum), so a transpose of it may be a reshape. */
  owned: boolean;
  /** The copy that holds it (its index among the scratch sizes), where it is one. */
  copy?: number;
}

/** A dim's extent at a batch of two or more: the batch is never a trivial axis here. */
const extent = (d: number) => (d < 0 ? 2 * -d : d);

function isIdentity(perm: readonly number[]): boolean {
  return perm.every((p, i) => p === i);
}

/** ORT's IsTransposeReshapeForEinsum: the non-trivial axes keep their order, so a copy is not needed. */
function isReshape(perm: readonly number[], dims: readonly number[]): boolean {
  let last = 0;
  for (const p of perm) {
    if (extent(dims[p]!) === 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

/** ORT's letter index: a-z, then A-Z. */
const letterIndex = (c: string) => (c >= "a" ? c.charCodeAt(0) - 97 : c.charCodeAt(0) - 65 + 26);

/**
 * An equation's labels as ORT reads them (the compiler's parser: the ellipsis' axes labelled
 * ".0", ".1", ...), with an implicit output in ORT's order: the ellipsis, then the letters seen
 * once, a-z then A-Z. A message where ORT or the parser refuses it.
 */
export function ortEinsumLabels(equation: string, ranks: number[]): { terms: string[][]; out: string[] } | string {
  const parsed = parseEquation(equation, ranks);
  if (typeof parsed === "string" || equation.includes("->")) return parsed;
  const count = new Map<string, number>();
  for (const l of parsed.terms.flat()) if (!l.startsWith(".")) count.set(l, (count.get(l) ?? 0) + 1);
  const letters = [...count].filter(([, c]) => c === 1).map(([l]) => l).sort((a, b) => letterIndex(a) - letterIndex(b));
  return { terms: parsed.terms, out: [...parsed.out.filter((l) => l.startsWith(".")), ...letters] };
}

/** The scratch of one Einsum node, or null where the equation is not one this follows. */
export function einsumScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const equation = typeof n.attrs.equation === "string" ? n.attrs.equation : null;
  const shapes = n.inputs.map((i) => (i ? values.shapeOf(i) : undefined));
  if (!equation || shapes.some((s) => !s)) return null;
  const parsed = ortEinsumLabels(equation, shapes.map((s) => s!.length));
  // Unequal ellipses (numpy broadcasts them, ORT refuses) are the compiler parser's only extra.
  if (typeof parsed === "string" || new Set(parsed.terms.map((t) => t.filter((l) => l.startsWith(".")).length).filter((e) => e > 0)).size > 1) return null;
  const { terms: labels, out: rhs } = parsed;
  const broadcast = [...new Set(labels.flat().filter((l) => l.startsWith(".")))].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
  const dtype = values.dtypeOf(n.inputs[0]!) ?? "float32";
  const bytes = (dims: readonly number[]) => perSample(dims) * DTYPE_BYTES[dtype];
  const batchless = (dims: readonly number[]) => !dims.some((d) => d < 0);

  // Letters numbered as first seen, after the ellipsis' axes (ORT puts them outermost).
  const index = new Map<string, number>(broadcast.map((b, i) => [b, i]));
  const dimOf: number[] = broadcast.map(() => 1);
  const lastInput: number[] = broadcast.map(() => 0);
  labels.forEach((l, k) => l.forEach((c, a) => {
    if (!index.has(c)) { index.set(c, index.size); dimOf.push(shapes[k]![a]!); lastInput.push(k); }
    const i = index.get(c)!;
    lastInput[i] = k;
    if (extent(dimOf[i]!) === 1) dimOf[i] = shapes[k]![a]!;
  }));
  for (const c of rhs) lastInput[index.get(c)!] = -1;
  const rank = index.size;
  const outputOf = new Map(rhs.map((c, o) => [index.get(c)!, o]));

  const sizes: number[] = [];
  const fixed: boolean[] = [];
  const freedAfter: (number | undefined)[] = [];
  /** Takes a copy of `dims`; its index among the sizes. */
  const take = (dims: readonly number[]) => { sizes.push(bytes(dims)); fixed.push(batchless(dims)); freedAfter.push(undefined); return sizes.length - 1; };
  /** Frees the copies at `at` once the one at `when` is taken. */
  const freeAt = (at: readonly (number | undefined)[], when: number) => at.forEach((i) => { if (i !== undefined) freedAfter[i] = when; });
  const after: number[] = [];
  const afterFixed: boolean[] = [];

  // Each input in the common order: a copy where its letters are not in that order.
  const operands: Operand[] = labels.map((l, k) => {
    const at = l.map((c) => index.get(c)!);
    const dims = new Array<number>(rank).fill(1);
    at.forEach((i, a) => { dims[i] = shapes[k]![a]!; });
    const perm = [...at.keys()].sort((a, b) => at[a]! - at[b]!);
    return isIdentity(perm) ? { dims, owned: false } : { dims, owned: false, copy: take(shapes[k]!) };
  });

  const reduceOnly = (op: Operand, axes: number[]): Operand => {
    const dims = op.dims.map((d, i) => (axes.includes(i) ? 1 : d));
    return { dims, owned: true, copy: take(dims) };
  };
  const outputDims = rhs.map((c) => dimOf[index.get(c)!]!);
  const finalize = (order: readonly number[]) => {
    // The candidate's axes that the output keeps, and where the output wants them.
    const kept = order.filter((i) => outputOf.has(i));
    const perm = new Array<number>(kept.length);
    kept.forEach((i, at) => { perm[outputOf.get(i)!] = at; });
    if (!isIdentity(perm)) { after.push(bytes(outputDims)); afterFixed.push(batchless(outputDims)); }
  };

  // The first operand: the axes it alone has and the output lacks are summed away first. The
  // running result is the processor's own (its first copy moves into it, the preprocessor keeps
  // the others to the end), freed when the next pair's result replaces it.
  let result = operands[0]!;
  const firstOnly = [...Array(rank).keys()].filter((i) => lastInput[i] === 0);
  if (firstOnly.length) result = reduceOnly(result, firstOnly);
  if (operands.length === 1) {
    finalize([...Array(rank).keys()].filter((i) => !firstOnly.includes(i)));
    return sizes.length || after.length ? { sizes, fixed, beforeOutputs: true, after, afterFixed } : null;
  }
  for (let k = 1; k < operands.length; k++) {
    const reduce = [...Array(rank).keys()].filter((i) => lastInput[i] === k);
    // The pair's own tensors only (a ReduceSum's) may be reshaped where a transpose is asked
    // for: the operands it is given are not its to change (ORT's current_left / current_right).
    let left: Operand = { dims: result.dims, owned: false };
    let right: Operand = { dims: operands[k]!.dims, owned: false };
    const first = sizes.length;
    const lro: number[] = [], lo: number[] = [], ro: number[] = [];
    for (let i = 0; i < rank; i++) {
      const l = extent(left.dims[i]!) > 1, r = extent(right.dims[i]!) > 1;
      if (reduce.includes(i)) {
        if (l && !r) left = reduceOnly(left, [i]);
        else if (r && !l) right = reduceOnly(right, [i]);
      } else if (l && r) lro.push(i);
      else if (l) lo.push(i);
      else ro.push(i);
    }
    const arrange = (op: Operand, perm: number[]): Operand => {
      if (isIdentity(perm) || (op.owned && isReshape(perm, op.dims))) return op;
      return { dims: perm.map((p) => op.dims[p]!), owned: true, copy: take(op.dims) };
    };
    left = arrange(left, [...lro, ...lo, ...reduce, ...ro]);
    right = arrange(right, [...lro, ...reduce, ...ro, ...lo]);
    const pick = (i: number) => (lro.includes(i) || lo.includes(i) ? result.dims[i]! : operands[k]!.dims[i]!);
    const order = [...lro, ...lo, ...reduce, ...ro];
    const product = order.map((i) => (reduce.includes(i) ? 1 : pick(i)));
    const matmul = take(product);
    if (k === operands.length - 1) {
      finalize(order);
    } else {
      // Back to the common order for the next pair: a copy unless the moved axes are trivial.
      const back = new Array<number>(rank);
      order.forEach((i, at) => { back[i] = at; });
      const dims = back.map((at) => product[at]!);
      const moved = !isIdentity(back) && !isReshape(back, product) ? take(dims) : undefined;
      // The pair returns: its own copies go, and the result it replaces (the first operand's
      // copy, moved into the result, or an earlier pair's).
      const pairs = [...Array(sizes.length - first).keys()].map((i) => first + i).filter((i) => i !== matmul && i !== moved);
      const replaced = k === 1 && !firstOnly.length ? operands[0]!.copy : result.copy;
      freeAt([...pairs, replaced, moved === undefined ? undefined : matmul], moved ?? matmul);
      result = { dims, owned: true, copy: moved ?? matmul };
    }
  }
  return { sizes, fixed, beforeOutputs: true, after, afterFixed, freedAfter };
}
