/**
 * ONNX Runtime's NHWC rewrite of a quantized model (its level-3 NhwcTransformer, then its
 * transpose optimizer), as the memory-pattern replay (ort-pattern.ts) needs it: ORT runs every
 * QLinearConv channels-last, and with it the quantized pools (NhwcMaxPool for a MaxPool on 8-bit
 * values, the average pools' channels_last form). Transposes in and out of that layout cancel
 * between such ops and move through the elementwise ones (QLinearAdd, QuantizeLinear, ...), so
 * one Transpose stays where the region starts (after the input's QuantizeLinear) and one where
 * an op that needs channels-first reads it (the Flatten before a classifier), each a tensor of
 * its own. ORT's optimized QDQ mobilenet_v2 and resnet18 have exactly those two; without the
 * first, a mobilenet_v2's first request at batch 64 asked its arena for one 9.2 MiB tensor
 * where ORT asks for two, and the regions the arena took after it differed.
 *
 * A tensor computed channels-last is renamed `t#nhwc` and holds `t` transposed (`perm` takes it
 * back, as ort-transposes.ts records the values it moves): the same bytes, its dims permuted for
 * the planner's reuse rule.
 */
import type { LNode } from "../compiler/ir.ts";
import type { TransposedValue } from "./ort-transposes.ts";

/** The op ORT's NHWC rewrite runs channels-last between Transposes of its own (where its input is 8-bit). */
const WRAPPED_OP = "QLinearConv";
/**
 * Spatial ops a Transpose moves through, run channels-last then: the average pools' channels_last
 * form, NhwcMaxPool for a MaxPool on 8-bit values (moved whenever a Transpose reaches it: ORT's
 * optimizer skips its cost check for MaxPool).
 */
const SPATIAL_PUSHED_OPS = new Set(["QLinearAveragePool", "QLinearGlobalAveragePool", "MaxPool"]);
/** Ops a Transpose moves through: elementwise, or with an axis ORT remaps (QLinearConcat, QLinearSoftmax). */
const LAYOUT_FREE_OPS = new Set([
  "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax", "QuantizeLinear", "DequantizeLinear",
  "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish",
]);

/** A shape as ORT's shape inference gives it: numbers and symbols; null where a dim is left unknown. */
export type SymbolicShape = readonly (number | string)[] | null;

export interface NhwcGraph {
  /** A computed tensor's inferred shape (-1 at the batch), undefined when unknown. */
  shapeOf(name: string): readonly number[] | undefined;
  /** A channels-first tensor's shape as ORT's planner sees it (declared, or carried from one). */
  symbolicShape(name: string): SymbolicShape;
  dtypeOf(name: string): string | undefined;
  isConst(name: string): boolean;
}

export interface NhwcRewrite {
  nodes: LNode[];
  /**
   * The nodes ORT makes here, in the order it makes them (their index decides its execution
   * order: ort-order.ts ortOrderOfFinalGraph): for each QLinearConv in graph order, the
   * Transposes wrapped around it (the one in, the one out) and the new channels-last node that
   * replaces it; then what its transpose optimizer makes (NhwcMaxPool, the Transposes it moves).
   * A ResNet-50's downsampling conv, first in the graph, runs after its block's third conv for
   * that: it has the lower index, so ORT's walk back from the Add reaches it last.
   */
  added: LNode[];
  /**
   * Each node it rewrites (an op run channels-last, a reader of a Transpose's output), and the
   * node that runs it: ORT's walk keeps such a node where the op was (a shufflenet's branches
   * run in the order ORT's QDQ rewrite left them; a residual's DequantizeLinear copy, made by
   * ORT's QDQ rewrite, runs just before the Add that reads it).
   */
  converted: Map<LNode, LNode>;
  /** The channels-last tensors: what each holds (ort-transposes.ts's form). */
  transposed: Map<string, TransposedValue>;
  /**
   * The channels-last tensors' shapes as ORT infers them for its own nodes (channelsLastShape):
   * the planner reuses a freed buffer only for a value of the same shape, symbol for symbol.
   */
  shapes: Map<string, SymbolicShape>;
}

/**
 * Dims of two shapes ORT's inference merges (a broadcast, a Concat's other axes): equal ones,
 * else the one that is not 1, else a number over a symbol; null where it cannot tell.
 */
function merged(shapes: readonly SymbolicShape[]): SymbolicShape {
  if (shapes.some((s) => s === null)) return null;
  const rank = Math.max(...shapes.map((s) => s!.length));
  const out: (number | string)[] = [];
  for (let k = 0; k < rank; k++) {
    const dims = [...new Set(shapes.map((s) => s![s!.length - rank + k] ?? 1))].filter((d) => d !== 1);
    const numbers = dims.filter((d) => typeof d === "number");
    if (dims.length <= 1) out.push(dims[0] ?? 1);
    else if (numbers.length === 1) out.push(numbers[0]!);
    else return null;
  }
  return out;
}

/**
 * The shape ORT's inference gives a channels-last node's output: the batch dim of its input, the
 * output's channels, and its spatial dims where the input's are numbers (a global pool's 1s
 * always); null (unknown) where they are not, as after a shufflenet's reshape.
 */
function channelsLastShape(n: LNode, input: SymbolicShape, outputDims: readonly number[] | undefined): SymbolicShape {
  if (!input || !outputDims || outputDims.length !== input.length) return null;
  const rank = input.length;
  const spatialKnown = input.slice(1, rank - 1).every((d) => typeof d === "number");
  const spatial = outputDims.slice(2);
  if (n.op !== "QLinearGlobalAveragePool" && !spatialKnown) return null;
  return [input[0]!, ...(n.op === "QLinearGlobalAveragePool" ? spatial.map(() => 1) : spatial), outputDims[1]!];
}

const NHWC_SUFFIX = "#nhwc";
/** The tensor a channels-last one holds (its name without the suffix); any other name as it is. */
export const channelsFirstName = (name: string): string => (name.endsWith(NHWC_SUFFIX) ? name.slice(0, -NHWC_SUFFIX.length) : name);

const is8Bit = (dtype: string | undefined) => dtype === "uint8" || dtype === "int8";
/** The permutation that takes a channels-last tensor of rank r back to channels-first. */
const toChannelsFirst = (rank: number) => [0, rank - 1, ...Array.from({ length: rank - 2 }, (_, i) => i + 1)];

/** A layout-free op's output shape from its channels-last inputs': a Concat sums their channels (the last axis). */
function followerShape(n: LNode, inputs: readonly SymbolicShape[]): SymbolicShape {
  if (n.op !== "QLinearConcat") return merged(inputs);
  if (inputs.some((s) => s === null)) return null;
  const last = inputs.map((s) => s![s!.length - 1]!);
  if (!last.every((d) => typeof d === "number")) return null;
  const rest = merged(inputs.map((s) => s!.slice(0, -1)));
  return rest && [...rest, (last as number[]).reduce((a, b) => a + b, 0)];
}

/** ORT's rank of a value for its transpose costs: the dims that are not 1 (the batch counts). */
const nonUnitRank = (s: readonly number[] | undefined): number => (s ? s.filter((d) => d !== 1).length : 5);

/**
 * The values from which a path of ops a Transpose moves through reaches a channels-last op (the
 * Transpose ORT wraps its input in): ORT's transpose optimizer counts no cost for the Transpose
 * it would leave after an op whose output leads there, as it will cancel.
 */
function valuesLeadingToTranspose(nodes: readonly LNode[], wrapped: (n: LNode) => boolean, movesThrough: (n: LNode) => boolean, isConst: (name: string) => boolean): Set<string> {
  const leads = new Set<string>();
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i]!;
    if (wrapped(n)) leads.add(n.inputs[0]!);
    else if (movesThrough(n) && n.outputs.some((o) => leads.has(o))) for (const t of n.inputs) if (t && !isConst(t)) leads.add(t);
  }
  return leads;
}

/** `nodes` with ORT's channels-last region of a quantized model (module comment); unchanged without one. */
export function ortNhwc(nodes: readonly LNode[], graphOutputs: readonly string[], g: NhwcGraph): NhwcRewrite {
  const transposed = new Map<string, TransposedValue>();
  const shapes = new Map<string, SymbolicShape>();
  const converted = new Map<LNode, LNode>();
  const rankOf = (t: string) => g.shapeOf(t)?.length ?? 0;
  const on8BitImage = (n: LNode) => !!n.inputs[0] && is8Bit(g.dtypeOf(n.inputs[0])) && rankOf(n.inputs[0]) >= 3;
  const wrapped = (n: LNode) => n.op === WRAPPED_OP && on8BitImage(n);
  const spatial = (n: LNode) => SPATIAL_PUSHED_OPS.has(n.op) && on8BitImage(n);
  /** Ops a Transpose moves through (ORT's handlers). */
  const movesThrough = (n: LNode) => (LAYOUT_FREE_OPS.has(n.op) || spatial(n)) && n.outputs.length === 1;
  if (!nodes.some(wrapped)) return { nodes: [...nodes], added: [], converted, transposed, shapes };
  /** A tensor's channels-last name, for one computed or transposed that way. */
  const lastOf = new Map<string, string>();
  /** Tensors computed channels-last whose channels-first form a Transpose has made. */
  const firstMade = new Set<string>();
  /** Tensors computed channels-first, read channels-last through a Transpose. */
  const computedFirst = new Set<string>();
  const out: LNode[] = [];
  /** What each channels-last conv's wrap makes ([Transpose in, Transpose out, the conv]), by the conv's output. */
  const wraps: LNode[][] = [];
  const wrapOf = new Map<string, LNode[]>();
  /** What the transpose optimizer makes, after every wrap. */
  const optimizerMade: LNode[] = [];
  const transpose = (input: string, output: string, perm: number[], madeBy: LNode[]) => {
    const t: LNode = { op: "Transpose", name: `${output}:nhwc-transpose`, inputs: [input], outputs: [output], attrs: { perm } };
    out.push(t);
    // A conv's Transpose out goes before the conv itself in its wrap.
    madeBy.splice(madeBy === optimizerMade ? madeBy.length : Math.max(0, madeBy.length - 1), 0, t);
  };
  const renameOut = (o: string) => {
    const name = `${o}${NHWC_SUFFIX}`;
    lastOf.set(o, name);
    transposed.set(name, { of: o, perm: toChannelsFirst(rankOf(o)) });
    return name;
  };
  /** The channels-last form of input x: its own, else a Transpose into it (once a tensor). */
  const lastInput = (x: string, madeBy: LNode[]) => {
    if (!x || g.isConst(x)) return x;
    const known = lastOf.get(x);
    if (known) return known;
    const name = renameOut(x);
    const rank = rankOf(x);
    const perm = [0, ...Array.from({ length: rank - 2 }, (_, i) => i + 2), 1];
    const first = g.symbolicShape(x);
    shapes.set(name, first && first.length === rank ? perm.map((p) => first[p]!) : null);
    transpose(x, name, perm, madeBy);
    return name;
  };
  /** The channels-first form of input x: x itself, made by a Transpose (once) where x was computed channels-last. */
  const firstInput = (x: string) => {
    const last = lastOf.get(x);
    if (last && !computedFirst.has(x) && !firstMade.has(x)) {
      firstMade.add(x);
      transpose(last, x, toChannelsFirst(rankOf(x)), wrapOf.get(x) ?? optimizerMade);
    }
    return x;
  };
  // A tensor some reader needs channels-first (a Reshape, a Flatten) gets its Transpose back
  // anyway; ORT's optimizer then moves no Transpose past its other readers (a shufflenet's
  // DequantizeLinear before a Shape runs channels-first), where it would add one.
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) for (const t of n.inputs) if (t) readers.set(t, [...(readers.get(t) ?? []), n]);
  const readChannelsFirst = (t: string) => (readers.get(t) ?? []).some((r) => !wrapped(r) && !movesThrough(r) && r.op !== "Shape") || graphOutputs.includes(t);
  const leadsToTranspose = valuesLeadingToTranspose(nodes, wrapped, movesThrough, g.isConst);
  const rank = (t: string) => nonUnitRank(g.shapeOf(t));
  /** A computed tensor ORT has channels-last, its channels-first form made by a Transpose after it. */
  const computedLast = (t: string) => lastOf.has(t) && !computedFirst.has(t);
  /**
   * ORT's cost check for moving the Transposes before `n` through it (CalculateCost in its
   * transpose optimizer, a node at a time in graph order): each input computed channels-last
   * lowers the cost by its rank where its Transpose goes once every reader takes it
   * channels-last; each other computed input raises it by its rank (a Transpose to add). Where
   * that gains, the Transpose left after the op counts too, unless the output leads on to a
   * channels-last op. Moved where the total is below 0; always for a MaxPool.
   */
  const moves = (n: LNode, computed: readonly string[]) => {
    if (!movesThrough(n) || !computed.some(computedLast)) return false;
    if (n.op === "MaxPool") return computedLast(n.inputs[0]!);
    const inputs = computed.reduce((c, t) => c + (computedLast(t) ? (readChannelsFirst(t) ? 0 : -rank(t)) : rank(t)), 0);
    return inputs < 0 && inputs + (leadsToTranspose.has(n.outputs[0]!) ? 0 : rank(n.outputs[0]!)) < 0;
  };
  for (const n of nodes) {
    if (wrapped(n)) {
      const x = n.inputs[0]!;
      if (!lastOf.has(x)) computedFirst.add(x);
      const wrap: LNode[] = [];
      const ins = n.inputs.map((t, i) => (i === 0 ? lastInput(t, wrap) : t));
      const channelsLastNode = { ...n, inputs: ins, outputs: n.outputs.map((o) => (o ? renameOut(o) : o)) };
      shapes.set(channelsLastNode.outputs[0]!, channelsLastShape(n, shapes.get(ins[0]!) ?? null, g.shapeOf(n.outputs[0]!)));
      out.push(channelsLastNode);
      converted.set(n, channelsLastNode);
      wrap.push(channelsLastNode);
      wraps.push(wrap);
      if (n.outputs[0]) wrapOf.set(n.outputs[0], wrap);
      continue;
    }
    const computed = n.inputs.filter((t) => t && !g.isConst(t));
    if (moves(n, computed)) {
      const ins = n.inputs.map((t) => (t && computed.includes(t) ? lastInput(t, optimizerMade) : t));
      const follower = { ...n, inputs: ins, outputs: n.outputs.map((o) => (o ? renameOut(o) : o)) };
      out.push(follower);
      // A MaxPool becomes a new node, NhwcMaxPool; the other ops keep theirs.
      if (n.op === "MaxPool") optimizerMade.push(follower);
      const inShapes = computed.map((t) => shapes.get(lastOf.get(t)!) ?? null);
      shapes.set(follower.outputs[0]!, spatial(n) ? channelsLastShape(n, inShapes[0]!, g.shapeOf(n.outputs[0]!)) : followerShape(n, inShapes));
      converted.set(n, follower);
      continue;
    }
    const reads = n.inputs.map((t) => (t && lastOf.has(t) && !computedFirst.has(t) ? firstInput(t) : t));
    const kept = reads.every((t, i) => t === n.inputs[i]) ? n : { ...n, inputs: reads };
    if (kept !== n) converted.set(n, kept);
    out.push(kept);
  }
  for (const o of graphOutputs) if (lastOf.has(o) && !computedFirst.has(o)) firstInput(o);
  return quantizedAfterTranspose({ nodes: out, added: [...wraps.flat(), ...optimizerMade], converted, transposed, shapes });
}

/**
 * A DequantizeLinear ORT moved a Transpose through (its output leads on to a channels-last op)
 * whose one reader stays channels-first (an Add with a channels-first skip): the Transpose ORT
 * leaves after it, on the float tensor, gets a QuantizeLinear -> DequantizeLinear pair of the
 * same scale and zero point after it (its transpose optimizer's MakeQDQNodeUnit, which keeps a
 * QDQ group's shape around an inserted Transpose), so the reader reads a float tensor of its own.
 * ORT 1.32's optimized graph of a signed QDQ mobilenet_v2 has each residual's second input made
 * so; without the pair, the replay of its mnasnet twin came out 12.5 % under ORT's block.
 */
function quantizedAfterTranspose(r: NhwcRewrite): NhwcRewrite {
  const readers = new Map<string, number>();
  const producer = new Map<string, LNode>();
  for (const n of r.nodes) {
    for (const t of n.inputs) if (t) readers.set(t, (readers.get(t) ?? 0) + 1);
    for (const o of n.outputs) if (o) producer.set(o, n);
  }
  const transposed = new Map(r.transposed);
  const madeFor = new Map<LNode, LNode[]>(); // the Transpose -> it, the QuantizeLinear and the DequantizeLinear after it
  const nodes = r.nodes.flatMap((n) => {
    const x = n.op === "Transpose" ? n.inputs[0] : undefined;
    const dq = x && readers.get(x) === 1 ? producer.get(x) : undefined;
    const layout = dq?.op === "DequantizeLinear" ? r.transposed.get(x!) : undefined;
    if (!dq || !layout || !r.added.includes(n)) return [n];
    const out = n.outputs[0]!;
    const [t, q] = [`${out}#transposed`, `${out}#requantized`];
    const asIs = layout.perm.map((_, i) => i);
    transposed.set(t, { of: out, perm: asIs });
    transposed.set(q, { of: channelsFirstName(dq.inputs[0]!), perm: asIs });
    const made: LNode[] = [
      { ...n, outputs: [t] },
      { op: "QuantizeLinear", name: `${q}:nhwc-requantize`, inputs: [t, dq.inputs[1] ?? "", dq.inputs[2] ?? ""], outputs: [q], attrs: {} },
      { ...dq, name: `${out}:nhwc-dequantize`, inputs: [q, ...dq.inputs.slice(1)], outputs: [out] },
    ];
    madeFor.set(n, made);
    return made;
  });
  if (madeFor.size === 0) return r;
  // Numbered where the Transpose was made, the QuantizeLinear and DequantizeLinear with it.
  return { ...r, nodes, transposed, added: r.added.flatMap((n) => madeFor.get(n) ?? [n]) };
}
