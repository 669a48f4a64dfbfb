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

/** Ops ORT runs channels-last where their input is 8-bit. */
const CHANNELS_LAST_OPS = new Set(["QLinearConv", "QLinearAveragePool", "QLinearGlobalAveragePool", "MaxPool"]);
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
  /** The Transposes it adds, in the order it adds them. */
  added: LNode[];
  /**
   * Each op it runs channels-last, and the node that runs it: ORT's walk keeps such a node where
   * the op was (a shufflenet's branches run in the order ORT's QDQ rewrite left them).
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

/** `nodes` with ORT's channels-last region of a quantized model (module comment); unchanged without one. */
export function ortNhwc(nodes: readonly LNode[], graphOutputs: readonly string[], g: NhwcGraph): NhwcRewrite {
  const transposed = new Map<string, TransposedValue>();
  const shapes = new Map<string, SymbolicShape>();
  const added: LNode[] = [];
  const converted = new Map<LNode, LNode>();
  const rankOf = (t: string) => g.shapeOf(t)?.length ?? 0;
  const channelsLast = (n: LNode) => CHANNELS_LAST_OPS.has(n.op) && !!n.inputs[0] && is8Bit(g.dtypeOf(n.inputs[0])) && rankOf(n.inputs[0]) >= 3;
  if (!nodes.some(channelsLast)) return { nodes: [...nodes], added, converted, transposed, shapes };
  /** A tensor's channels-last name, for one computed or transposed that way. */
  const lastOf = new Map<string, string>();
  /** Tensors computed channels-last whose channels-first form a Transpose has made. */
  const firstMade = new Set<string>();
  /** Tensors computed channels-first, read channels-last through a Transpose. */
  const computedFirst = new Set<string>();
  const out: LNode[] = [];
  const transpose = (input: string, output: string, perm: number[]) => {
    const t: LNode = { op: "Transpose", name: `${output}:nhwc-transpose`, inputs: [input], outputs: [output], attrs: { perm } };
    out.push(t);
    added.push(t);
  };
  const renameOut = (o: string) => {
    const name = `${o}${NHWC_SUFFIX}`;
    lastOf.set(o, name);
    transposed.set(name, { of: o, perm: toChannelsFirst(rankOf(o)) });
    return name;
  };
  /** The channels-last form of input x: its own, else a Transpose into it (once a tensor). */
  const lastInput = (x: string) => {
    if (!x || g.isConst(x)) return x;
    const known = lastOf.get(x);
    if (known) return known;
    const name = renameOut(x);
    const rank = rankOf(x);
    const perm = [0, ...Array.from({ length: rank - 2 }, (_, i) => i + 2), 1];
    const first = g.symbolicShape(x);
    shapes.set(name, first && first.length === rank ? perm.map((p) => first[p]!) : null);
    transpose(x, name, perm);
    return name;
  };
  /** The channels-first form of input x: x itself, made by a Transpose (once) where x was computed channels-last. */
  const firstInput = (x: string) => {
    const last = lastOf.get(x);
    if (last && !computedFirst.has(x) && !firstMade.has(x)) {
      firstMade.add(x);
      transpose(last, x, toChannelsFirst(rankOf(x)));
    }
    return x;
  };
  // A tensor some reader needs channels-first (a Reshape, a Flatten) gets its Transpose back
  // anyway; ORT's optimizer then moves no Transpose past its other readers (a shufflenet's
  // DequantizeLinear before a Shape runs channels-first), where it would add one.
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) for (const t of n.inputs) if (t) readers.set(t, [...(readers.get(t) ?? []), n]);
  const readChannelsFirst = (t: string) => (readers.get(t) ?? []).some((r) => !channelsLast(r) && !LAYOUT_FREE_OPS.has(r.op) && r.op !== "Shape") || graphOutputs.includes(t);
  for (const n of nodes) {
    if (channelsLast(n)) {
      const x = n.inputs[0]!;
      if (!lastOf.has(x)) computedFirst.add(x);
      const ins = n.inputs.map((t, i) => (i === 0 ? lastInput(t) : t));
      const channelsLastNode = { ...n, inputs: ins, outputs: n.outputs.map((o) => (o ? renameOut(o) : o)) };
      shapes.set(channelsLastNode.outputs[0]!, channelsLastShape(n, shapes.get(ins[0]!) ?? null, g.shapeOf(n.outputs[0]!)));
      out.push(channelsLastNode);
      converted.set(n, channelsLastNode);
      continue;
    }
    const computed = n.inputs.filter((t) => t && !g.isConst(t));
    const follows = LAYOUT_FREE_OPS.has(n.op) && computed.length > 0 && computed.every((t) => lastOf.has(t) && !computedFirst.has(t) && !readChannelsFirst(t)) && n.outputs.length === 1;
    if (follows) {
      const ins = n.inputs.map((t) => lastOf.get(t) ?? t);
      const follower = { ...n, inputs: ins, outputs: n.outputs.map((o) => (o ? renameOut(o) : o)) };
      out.push(follower);
      shapes.set(follower.outputs[0]!, followerShape(n, computed.map((t) => shapes.get(lastOf.get(t)!) ?? null)));
      continue;
    }
    out.push({ ...n, inputs: n.inputs.map((t) => (t && lastOf.has(t) && !computedFirst.has(t) ? firstInput(t) : t)) });
  }
  for (const o of graphOutputs) if (lastOf.has(o) && !computedFirst.has(o)) firstInput(o);
  return { nodes: out, added, converted, transposed, shapes };
}
