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
 * transpose to the output's order after it; all freed when the kernel returns. A run of more
 * than two operands counts every pair's copies at once (ORT frees a pair's before the next).
 * An ellipsis' axes are taken as ORT numbers them, outermost. Not taken: a repeated letter
 * within an operand (ORT's diagonal): none.
 */
import { DTYPE_BYTES, type LNode, perSample } from "../compiler/ir.ts";
import type { KernelScratch, ValueInfo } from "./ort-scratch.ts";

/** An operand as the processor holds it: its dims in the common axis order, 1 where it has no such axis. */
interface Operand {
  dims: number[];
  /** Whether the pair being computed made it (a ReduceSum), so a transpose of it may be a reshape. */
  owned: boolean;
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

/** The scratch of one Einsum node, or null where the equation is not one this follows. */
export function einsumScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const equation = typeof n.attrs.equation === "string" ? n.attrs.equation.replace(/\s/g, "") : null;
  if (!equation) return null;
  const [lhs, rhsGiven] = equation.split("->") as [string, string | undefined];
  const subscripts = lhs.split(",");
  const shapes = n.inputs.map((i) => (i ? values.shapeOf(i) : undefined));
  if (subscripts.length !== n.inputs.length || shapes.some((s) => !s)) return null;
  // An ellipsis stands for the same number of axes in every operand that has any (ORT's rule),
  // labelled #0, #1, ... and numbered before every letter: ORT puts them outermost.
  const ellipsisAxes = new Set(subscripts.flatMap((s, k) => (s.includes("...") ? [shapes[k]!.length - (s.length - 3)] : [])).filter((e) => e > 0));
  if (ellipsisAxes.size > 1) return null;
  const broadcast = Array.from({ length: [...ellipsisAxes][0] ?? 0 }, (_, i) => `#${i}`);
  const expand = (s: string, own: number) => {
    const at = s.indexOf("...");
    return at < 0 ? [...s] : [...s.slice(0, at)].concat(broadcast.slice(broadcast.length - own), [...s.slice(at + 3)]);
  };
  const labels = subscripts.map((s, k) => expand(s, s.includes("...") ? shapes[k]!.length - (s.length - 3) : 0));
  if (labels.some((l, k) => l.length !== shapes[k]!.length || l.some((c) => c === "."))) return null;
  if (labels.some((l) => new Set(l).size !== l.length)) return null; // a diagonal
  const dtype = values.dtypeOf(n.inputs[0]!) ?? "float32";
  const bytes = (dims: readonly number[]) => perSample(dims) * DTYPE_BYTES[dtype];
  const batchless = (dims: readonly number[]) => !dims.some((d) => d < 0);

  // Letters numbered as first seen, after the ellipsis' axes; implicit output: the ellipsis,
  // then the letters seen once, a-z then A-Z (ORT's letter index).
  const index = new Map<string, number>(broadcast.map((b, i) => [b, i]));
  const count = new Map<string, number>();
  const dimOf: number[] = broadcast.map(() => 1);
  const lastInput: number[] = broadcast.map(() => 0);
  labels.forEach((l, k) => l.forEach((c, a) => {
    if (!index.has(c)) { index.set(c, index.size); dimOf.push(shapes[k]![a]!); lastInput.push(k); }
    const i = index.get(c)!;
    lastInput[i] = k;
    if (extent(dimOf[i]!) === 1) dimOf[i] = shapes[k]![a]!;
    if (!c.startsWith("#")) count.set(c, (count.get(c) ?? 0) + 1);
  }));
  const letterIndex = (c: string) => (c >= "a" ? c.charCodeAt(0) - 97 : c.charCodeAt(0) - 65 + 26);
  const implicit = () => (lhs.includes("...") ? broadcast : []).concat([...count].filter(([, c]) => c === 1).map(([l]) => l).sort((a, b) => letterIndex(a) - letterIndex(b)));
  const rhs = rhsGiven === undefined ? implicit() : expand(rhsGiven, broadcast.length);
  if (rhs.some((c) => !index.has(c))) return null;
  for (const c of rhs) lastInput[index.get(c)!] = -1;
  const rank = index.size;
  const outputOf = new Map(rhs.map((c, o) => [index.get(c)!, o]));

  const sizes: number[] = [];
  const fixed: boolean[] = [];
  const take = (dims: readonly number[]) => { sizes.push(bytes(dims)); fixed.push(batchless(dims)); };
  const after: number[] = [];
  const afterFixed: boolean[] = [];

  // Each input in the common order: a copy where its letters are not in that order.
  const operands: Operand[] = labels.map((l, k) => {
    const at = l.map((c) => index.get(c)!);
    const dims = new Array<number>(rank).fill(1);
    at.forEach((i, a) => { dims[i] = shapes[k]![a]!; });
    const perm = [...at.keys()].sort((a, b) => at[a]! - at[b]!);
    if (!isIdentity(perm)) take(shapes[k]!);
    return { dims, owned: false };
  });

  const reduceOnly = (op: Operand, axes: number[]): Operand => {
    const dims = op.dims.map((d, i) => (axes.includes(i) ? 1 : d));
    take(dims);
    return { dims, owned: true };
  };
  const outputDims = rhs.map((c) => dimOf[index.get(c)!]!);
  const finalize = (order: readonly number[]) => {
    // The candidate's axes that the output keeps, and where the output wants them.
    const kept = order.filter((i) => outputOf.has(i));
    const perm = new Array<number>(kept.length);
    kept.forEach((i, at) => { perm[outputOf.get(i)!] = at; });
    if (!isIdentity(perm)) { after.push(bytes(outputDims)); afterFixed.push(batchless(outputDims)); }
  };

  // The first operand: the axes it alone has and the output lacks are summed away first.
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
      take(op.dims);
      return { dims: perm.map((p) => op.dims[p]!), owned: true };
    };
    left = arrange(left, [...lro, ...lo, ...reduce, ...ro]);
    right = arrange(right, [...lro, ...reduce, ...ro, ...lo]);
    const pick = (i: number) => (lro.includes(i) || lo.includes(i) ? result.dims[i]! : operands[k]!.dims[i]!);
    const order = [...lro, ...lo, ...reduce, ...ro];
    const product = order.map((i) => (reduce.includes(i) ? 1 : pick(i)));
    take(product);
    if (k === operands.length - 1) {
      finalize(order);
    } else {
      // Back to the common order for the next pair: a copy unless the moved axes are trivial.
      const back = new Array<number>(rank);
      order.forEach((i, at) => { back[i] = at; });
      const dims = back.map((at) => product[at]!);
      if (!isIdentity(back) && !isReshape(back, product)) take(dims);
      result = { dims, owned: true };
    }
  }
  return { sizes, fixed, beforeOutputs: true, after, afterFixed };
}
