/**
 * ONNX Runtime's transpose optimizer (onnxruntime/core/optimizer/transpose_optimization), as far
 * as the memory-pattern replay (ort-pattern.ts) needs it: a Transpose moves down through the
 * elementwise ops after it wherever that adds no Transpose (their other inputs are constants,
 * which ORT transposes once at load, or values transposed the same way), an inverse Transpose
 * cancels it, and a ReorderInput absorbs it (it reads the channels-last layout itself; a graph
 * Transpose only where the reorder's conv is its one reader that is no elementwise op). Where
 * the push stops, the Transpose is materialized there, after the ops it moved past.
 *
 * Why it matters: a ConvNeXt block runs its MLP channels-last between two Transposes and adds
 * the residual in NCHW. In its first stage the residual comes from a channels-last LayerNorm
 * through a Transpose as well, so ORT pushes every block's closing Transpose through the layer
 * scale and the residual Add and cancels it: the stage runs channels-last with one tensor a block
 * fewer, and its tensors take each other's freed buffers (ORT reuses a buffer only for the same
 * shape). In the later stages the residual is a conv's NCHW output: the push stops at the Add.
 * Without this, convnext_tiny's simulated pattern was 18.06 MB a sample against ORT's 15.65
 * (ORT's graph and order through the same planner give 15.65 exactly), and its 8-sample block
 * needed a 256 MiB arena region ORT never takes.
 *
 * Two more of its handlers: a Softmax (opset 13 on) takes the Transpose with its axis renumbered,
 * where another Transpose follows (CaiT's talking heads cancel theirs); a Gather of one scalar
 * index moves it after itself, less the axis it takes (CaiT's `qkv[0]`, `qkv[1]`, `qkv[2]`). The
 * Transposes the push places are ones ORT makes (MADE_TRANSPOSE): ort-pattern.ts walks the
 * pushed graph again in ORT's order, numbering them after the file's nodes.
 *
 * Runs on the lowered graph after the fusions and the NCHWc rewrite (ort-fusions.ts,
 * ort-nchwc.ts); ORT runs it first, but the rewrites it meets here (ReorderInput, BiasGelu)
 * are ones it makes room for: a Transpose before a Conv becomes its ReorderInput's
 * channels_last, and BiasGelu is left alone (its bias follows the last axis).
 */
import type { LNode } from "../compiler/ir.ts";

/** Elementwise ops a Transpose moves through (constants broadcast against the moved layout). */
const ELEMENTWISE = new Set(["Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf", "Abs", "Neg", "Sqrt", "Exp", "Log", "Sin", "Cos"]);
/**
 * Ops over one axis a Transpose moves through with the axis renumbered (ORT's soft_hard_max
 * handler, from opset 13, where the axis is one axis and not the trailing ones flattened). CaiT's
 * talking-heads attention permutes its scores heads-last for a Linear across heads, back for the
 * Softmax over keys, and heads-last again for the next Linear: ORT moves the middle Transpose
 * through the Softmax and cancels it, so the Softmax runs heads-last on the first Linear's output
 * and two score-sized tensors a block are never made. A fixture of that block (ort-pattern.test.ts
 * talking-heads) planned 1.5x ORT's block without it.
 */
const AXIS_OPS = new Set(["Softmax", "LogSoftmax"]);
const REORDER_IN = "ort:ReorderInput";
/** The NHWC -> NCHW permutation a ReorderInput takes as its channels_last layout. */
const TO_NCHW = [0, 3, 1, 2];

export interface TransposedValue {
  /** The value of the original graph it holds, in the layout before `perm`. */
  of: string;
  /** The permutation that turns it into `of` (`of` = Transpose(this, perm)). */
  perm: number[];
}

export interface TransposeRewrite {
  nodes: LNode[];
  /** Values the push created (an op run before the Transpose it moved past): what they hold. */
  transposed: Map<string, TransposedValue>;
  /** Each node of `nodes` that stands for a node it was given: that node (the Transposes it placed stand for none). */
  origin: Map<LNode, LNode>;
}

/** An axis attribute (default -1, the last) as a non-negative axis of a rank. */
const axisOf = (axis: unknown, rank: number) => {
  const a = typeof axis === "number" ? axis : -1;
  return a < 0 ? a + rank : a;
};
/** The name suffix of a Transpose the push places where ORT makes one (ort-order.ts numbers it after the file's nodes). */
export const MADE_TRANSPOSE = "#made-transpose";
const isPerm = (p: unknown): p is number[] => Array.isArray(p) && p.every((x) => typeof x === "number");
const sameArray = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
/** Transpose(Transpose(x, p), q) is x. */
const cancels = (p: readonly number[], q: readonly number[]) => p.length === q.length && q.every((x, i) => p[x] === i);

/** What the replay knows of the graph beyond its nodes, for the rules that need it. */
export interface TransposeGraphFacts {
  /** The file's opset (a Softmax moves from 13 on). */
  opset?: number;
  /** A constant's dims (a Gather's index: a scalar takes one slice of an axis). */
  constDims?: (name: string) => readonly number[] | undefined;
}

/**
 * `nodes` with ORT's Transposes moved, cancelled and absorbed (above). A Transpose that moves
 * nowhere (its first reader is not one it moves through) keeps its place: a first pass finds
 * them, a second runs them as they are (moving them to their reader would change what is
 * alive when, which is what the pattern is made of).
 */
export function ortPushTransposes(nodes: readonly LNode[], outputs: readonly string[], isConst: (name: string) => boolean, beforeNchwc: readonly LNode[] = [], facts: TransposeGraphFacts = {}): TransposeRewrite {
  const opset = facts.opset ?? 13;
  // Before opset 13 a Softmax runs over its axis and every one after it, flattened: ORT moves a
  // Transpose through it only where the permutation keeps those in place, which the replay leaves.
  const axisOpsMove = opset >= 13;
  // The Transposes whose readers are all Gathers of one index (the same in every pass).
  const unbound = transposesUnbound(nodes, facts.constDims);
  // Each value's readers before the NCHWc rewrite that no Transpose moves through (a conv, a
  // pool): ORT's NCHWc rewrite makes a graph Transpose its ReorderInput's channels-last layout
  // only where it is the one such reader.
  const readers = new Map<string, number>();
  for (const n of beforeNchwc) for (const i of new Set(n.inputs)) if (i && !ELEMENTWISE.has(n.op)) readers.set(i, (readers.get(i) ?? 0) + 1);
  const readersBeforeNchwc = (name: string) => (beforeNchwc.length === 0 ? 1 : readers.get(name) ?? 0);
  let stay = new Set<string>();
  for (let pass = 0; pass < 4; pass++) {
    const r = pushPass(nodes, outputs, isConst, stay, readersBeforeNchwc, axisOpsMove, unbound, facts);
    if (r.unmoved.size === 0) return r;
    stay = new Set([...stay, ...r.unmoved]);
  }
  return pushPass(nodes, outputs, isConst, stay, readersBeforeNchwc, axisOpsMove, unbound, facts);
}

function pushPass(nodes: readonly LNode[], outputs: readonly string[], isConst: (name: string) => boolean, stay: ReadonlySet<string>, readersBeforeNchwc: (name: string) => number, axisOpsMove: boolean, unbound: ReadonlySet<string>, facts: TransposeGraphFacts): TransposeRewrite & { unmoved: Set<string> } {
  const graphOutputs = new Set(outputs);
  const movesThrough = (op: string) => ELEMENTWISE.has(op) || (axisOpsMove && AXIS_OPS.has(op));
  const leadsToTranspose = valuesLeadingToTranspose(nodes, movesThrough);
  // A value held only transposed: `src` (in the layout before `perm`) is what is computed;
  // `original`: it is an original Transpose's output, not yet moved past any op.
  // `made`: where it is materialized, the Transpose is one ORT makes when it moves one (numbered
  // after the file's nodes), not the file's own Transpose (its number kept).
  const pending = new Map<string, { src: string; perm: number[]; original: boolean; made: boolean }>();
  const alias = new Map<string, string>(); // a value cancelled away -> the value it equals
  const transposed = new Map<string, TransposedValue>();
  const unmoved = new Set<string>();
  const origin = new Map<LNode, LNode>();
  const out: LNode[] = [];
  // A node of the output stands for the node it was made from.
  const emit = (made: LNode, from: LNode) => {
    origin.set(made, from);
    out.push(made);
  };
  const materialize = (v: string) => {
    const p = pending.get(v);
    if (!p) return;
    pending.delete(v);
    if (p.original) unmoved.add(v);
    out.push({ op: "Transpose", name: `${v}${p.made ? MADE_TRANSPOSE : "#transpose"}`, inputs: [p.src], outputs: [v], attrs: { perm: p.perm } });
  };
  for (const n0 of nodes) {
    const n: LNode = { ...n0, inputs: n0.inputs.map((i) => alias.get(i) ?? i) };
    const input = n.inputs[0] ?? "";
    const out0 = n.outputs[0] ?? "";
    if (n.op === "Transpose" && isPerm(n.attrs.perm) && n.outputs.length === 1 && !graphOutputs.has(out0) && !stay.has(out0)) {
      const p = pending.get(input);
      if (p && cancels(p.perm, n.attrs.perm)) {
        alias.set(out0, p.src);
        continue;
      }
      materialize(input);
      pending.set(out0, { src: input, perm: n.attrs.perm, original: true, made: false });
      continue;
    }
    // A Gather of one index along an axis of a Transpose's output (timm's `qkv[0]`, `qkv[1]`,
    // `qkv[2]` after its permute): ORT's handler moves the Transpose after each Gather (the rank
    // the Gather drops makes the move pay), its permutation less that axis. The qkv block then
    // dies at the last Gather, before the attention, and ORT runs v's Gather first (its walk
    // over the final graph, ort-pattern.ts): CaiT's replayed pattern was 1.37x ORT's block.
    const p0 = pending.get(input);
    const axis = p0?.original && unbound.has(input) ? gatheredAxis(n, p0.perm.length, facts.constDims) : undefined;
    if (p0 && axis !== undefined) {
      const perm = withoutAxis(p0.perm, axis);
      const part = `${out0}#before-transpose`;
      emit({ ...n, inputs: [p0.src, ...n.inputs.slice(1)], outputs: [part], attrs: { ...n.attrs, axis: p0.perm[axis]! } }, n0);
      transposed.set(part, { of: out0, perm });
      pending.set(out0, { src: part, perm, original: false, made: true });
      if (graphOutputs.has(out0)) materialize(out0);
      continue;
    }
    // A Transpose of the graph that two convs read before the NCHWc rewrite stays (a UperNet
    // stage norm feeding the next stage and its lateral conv, one node after ORT's CSE): their
    // shared ReorderInput reads the transposed tensor.
    if (n.op === REORDER_IN) {
      const p = pending.get(input);
      if (p && sameArray(p.perm, TO_NCHW) && (!p.original || readersBeforeNchwc(input) <= 1)) {
        emit({ ...n, inputs: [p.src, ...n.inputs.slice(1)] }, n0);
        continue;
      }
    }
    const moved = n.inputs.filter((i) => pending.has(i));
    const perm = moved.length > 0 ? pending.get(moved[0]!)!.perm : null;
    if (perm && movesThrough(n.op) && n.outputs.length === 1 &&
        n.inputs.every((i) => !i || isConst(i) || (pending.has(i) && sameArray(pending.get(i)!.perm, perm))) &&
        (moved.length > 1 || leadsToTranspose.has(out0))) {
      const src = `${out0}#before-transpose`;
      // An op over one axis: the same axis of the value before the Transpose.
      const attrs = AXIS_OPS.has(n.op) ? { ...n.attrs, axis: perm[axisOf(n.attrs.axis, perm.length)]! } : n.attrs;
      emit({ ...n, inputs: n.inputs.map((i) => pending.get(i)?.src ?? i), outputs: [src], attrs }, n0);
      transposed.set(src, { of: out0, perm });
      for (const i of moved) if (pending.get(i)!.original) pending.set(i, { ...pending.get(i)!, original: false });
      pending.set(out0, { src, perm, original: false, made: true });
      if (graphOutputs.has(out0)) materialize(out0);
      continue;
    }
    for (const i of moved) materialize(i);
    emit(n, n0);
  }
  for (const v of [...pending.keys()]) if (graphOutputs.has(v)) materialize(v);
  return { nodes: out, transposed, origin, unmoved };
}

/** The axis a Gather of one constant scalar index takes from its data (of rank `rank`); undefined for any other node. */
function gatheredAxis(n: LNode, rank: number, constDims: TransposeGraphFacts["constDims"]): number | undefined {
  if (n.op !== "Gather" || n.outputs.length !== 1 || !n.inputs[1] || constDims?.(n.inputs[1])?.length !== 0) return undefined;
  return axisOf(n.attrs.axis ?? 0, rank);
}

/**
 * Original Transposes every reader of which is such a Gather: ORT moves a Transpose only where
 * it can move it through each of its readers (CanLikelyRemoveTranspose).
 */
function transposesUnbound(nodes: readonly LNode[], constDims: TransposeGraphFacts["constDims"]): Set<string> {
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) for (const i of new Set(n.inputs)) if (i) readers.set(i, [...(readers.get(i) ?? []), n]);
  const out = new Set<string>();
  for (const n of nodes) {
    const o = n.outputs[0];
    if (n.op !== "Transpose" || !o || !isPerm(n.attrs.perm)) continue;
    const rank = n.attrs.perm.length;
    const rs = readers.get(o) ?? [];
    if (rs.length > 0 && rs.every((r) => r.inputs[0] === o && gatheredAxis(r, rank, constDims) !== undefined)) out.add(o);
  }
  return out;
}

/**
 * A permutation with one of its output axes dropped (ORT's SqueezePerm): the value before it
 * loses the axis that one came from, and the axes after it are renumbered.
 */
function withoutAxis(perm: readonly number[], axis: number): number[] {
  const from = perm[axis]!;
  return perm.filter((_, i) => i !== axis).map((p) => (p > from ? p - 1 : p));
}

/**
 * Values from which a Transpose is reached through elementwise ops (and Softmax) alone. ORT
 * moves a Transpose past an op whose other inputs are constants (its cost estimate: 0) only when the op's output
 * leads to another Transpose it may cancel; past an op whose other input is transposed the same
 * way (that one cancels: below 0) always; past one with a plain input (a Transpose to add) never.
 * So a ConvNeXt stage's blocks move theirs through the layer scale when a LayerNorm2d's Transpose
 * follows the stage, and the last stage's blocks (a pooling follows it) keep them in place.
 */
function valuesLeadingToTranspose(nodes: readonly LNode[], movesThrough: (op: string) => boolean): Set<string> {
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) for (const i of n.inputs) if (i) readers.set(i, [...(readers.get(i) ?? []), n]);
  const leads = new Set<string>();
  for (let k = nodes.length - 1; k >= 0; k--) {
    for (const o of nodes[k]!.outputs) {
      const rs = readers.get(o) ?? [];
      if (rs.some((r) => r.op === "Transpose" || (movesThrough(r.op) && r.outputs.some((x) => leads.has(x))))) leads.add(o);
    }
  }
  return leads;
}

/**
 * The transpose optimizer's handler for a Shape: Shape(Transpose(x, perm)) becomes
 * Gather(Shape(x), perm), two nodes ORT makes (so numbers after every other) where the file has
 * one. The Shape then reads x, not the Transpose's output, which changes ORT's order: DeiT's
 * batch size is the Shape of its patches after their Transpose, and the cls-token Expands that
 * read it ran after that Transpose in the replay, before it in ORT (the Expands' chain of shape
 * values then lives across the Transpose in ORT's run). `created`: the new nodes, in the order
 * ORT makes them; `newShapes`: each new Shape's output and its length (x's rank).
 */
export function ortShapesBeforeTransposes(nodes: readonly LNode[]): { nodes: LNode[]; created: LNode[]; newShapes: Map<string, number> } {
  const producer = new Map<string, LNode>();
  for (const n of nodes) for (const o of n.outputs) if (o) producer.set(o, n);
  const created: LNode[] = [];
  const newShapes = new Map<string, number>();
  const out = nodes.flatMap((n) => {
    const t = n.op === "Shape" && n.inputs[0] ? producer.get(n.inputs[0]) : undefined;
    const perm = t?.op === "Transpose" ? t.attrs.perm : undefined;
    if (!t || !isPerm(perm) || !t.inputs[0] || !n.outputs[0] || n.attrs.start !== undefined || n.attrs.end !== undefined) return [n];
    const whole = `${n.outputs[0]}#before-transpose`;
    const shape: LNode = { op: "Shape", name: `${n.name}#before-transpose`, inputs: [t.inputs[0]], outputs: [whole], attrs: {} };
    const gather: LNode = { op: "Gather", name: n.name, inputs: [whole], outputs: [n.outputs[0]], attrs: { axis: 0, perm } };
    created.push(shape, gather);
    newShapes.set(whole, perm.length);
    return [shape, gather];
  });
  return { nodes: out, created, newShapes };
}
