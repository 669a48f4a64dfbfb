/**
 * The 1x1 Conv -> depthwise Conv pair (MobileNet v2/v3's, MnasNet's and EfficientNet's expand
 * and depthwise convs) that memlane-rt's CPU backend runs as one kernel
 * (native/runtime/src/cpu/conv_pw_dw.h, `pointwise_depthwise_chain`, whose rule this mirrors):
 * it computes the 1x1 conv's output a band of rows at a time from the 1x1 conv's input, while
 * it writes the depthwise conv's output. So the plan keeps that input alive until the pair's
 * last op: otherwise the planner could give the depthwise output the input's bytes (the input
 * dies at the 1x1 conv in a block without a residual), and the backend would have to run the
 * two apart. The cost is at most that input's bytes at one step, where it would have been
 * reused. The tensors between the two convs are never written: the backend reports their
 * bytes to the estimate (cpu/arena_unwritten.h).
 */
import type { Lifetime } from "./arena.ts";
import type { LNode } from "./ir.ts";

/** The activations the backend folds into either conv of the pair (conv_act_of in conv_act.h). */
const FOLDED_ACTIVATIONS = new Set(["Relu", "Clip", "HardSwish", "SiLU"]);

/** An op of the compiler's graph (tensor names) or of a plan (tensor ids). */
export interface OpLike<K> {
  op: string;
  inputs: readonly K[];
  outputs: readonly K[];
  attrs: Readonly<Record<string, unknown>>;
}

export interface ConvPair<K> {
  /** The 1x1 conv's step, and the pair's last (the depthwise conv's, or its activation op's). */
  step: number;
  last: number;
  /** The 1x1 conv's input. */
  input: K;
  /** The tensors between the two convs (the 1x1 output, and its activation's): the fused kernel never writes them. */
  between: K[];
  /** The depthwise conv's input dims, [batch, C, H, W]. */
  dims: readonly number[];
}

const ints = (v: unknown): number[] => (Array.isArray(v) ? (v as number[]) : []);

function isConv1x1<K>(n: OpLike<K>): boolean {
  return n.op === "Conv" && ints(n.attrs.kernel).every((k) => k === 1) && ints(n.attrs.strides).every((s) => s === 1) &&
    ints(n.attrs.pads).every((p) => p === 0) && n.attrs.group === 1;
}

/**
 * Every pair in `ops`: a 1x1 conv (stride 1, no pads, one group), its activation (its own Relu,
 * or a folded activation op right after reading it alone), then the depthwise conv of that
 * result (its activation likewise); every tensor between read by nothing else and no graph
 * output. `shapeOf`: a tensor's dims (-1 at the batch).
 */
export function pointwiseDepthwisePairs<K>(ops: readonly OpLike<K>[], graphOutputs: readonly K[], shapeOf: (t: K) => readonly number[] | undefined): ConvPair<K>[] {
  const readers = new Map<K, number>();
  for (const o of graphOutputs) readers.set(o, (readers.get(o) ?? 0) + 1);
  for (const n of ops) for (const i of n.inputs) readers.set(i, (readers.get(i) ?? 0) + 1);
  const readOnce = (t: K) => readers.get(t) === 1;
  // The conv at `step` and its folded activation op, if one reads it alone: the tensor that holds the result, the step after.
  const withActivation = (step: number): { out: K; next: number; between: K[] } => {
    const out = ops[step]!.outputs[0]!;
    const a = ops[step + 1];
    if (ops[step]!.attrs.activation === "none" && a && FOLDED_ACTIVATIONS.has(a.op) && a.inputs.length === 1 && a.inputs[0] === out && readOnce(out))
      return { out: a.outputs[0]!, next: step + 2, between: [out] };
    return { out, next: step + 1, between: [] };
  };
  const pairs: ConvPair<K>[] = [];
  ops.forEach((n, step) => {
    if (!isConv1x1(n) || n.outputs.length !== 1) return;
    const pw = withActivation(step);
    const dw = ops[pw.next];
    const dims = shapeOf(pw.out);
    if (!dw || dw.op !== "Conv" || dw.inputs[0] !== pw.out || !readOnce(pw.out) || !dims || dims.length !== 4) return;
    if (dims[1]! < 2 || dw.attrs.group !== dims[1]) return;
    pairs.push({ step, last: withActivation(pw.next).next - 1, input: n.inputs[0]!, between: [...pw.between, pw.out], dims });
  });
  return pairs;
}

/** Keeps each pair's 1x1 conv input alive through the pair's last step (the header's why). */
export function keepPairInputs(nodes: readonly LNode[], graphOutputs: readonly string[], shapes: ReadonlyMap<string, number[]>, lives: Lifetime[]): void {
  const byName = new Map(lives.map((l) => [l.name, l]));
  for (const p of pointwiseDepthwisePairs(nodes, graphOutputs, (t) => shapes.get(t))) {
    const l = byName.get(p.input);
    if (l) l.last = Math.max(l.last, p.last);
  }
}
