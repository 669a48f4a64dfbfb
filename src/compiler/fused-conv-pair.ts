/**
 * The 1x1 Conv -> depthwise Conv pair (MobileNet v2/v3's, MnasNet's and EfficientNet's expand
 * and depthwise convs) that memlane-rt's CPU backend runs as one kernel
 * (native/runtime/src/cpu/conv_pw_dw.h): it computes the 1x1 conv's output a band of rows at
 * a time from the 1x1 conv's input, while it writes the depthwise conv's output. So the plan
 * keeps that input alive until the pair's last op: otherwise the planner could give the
 * depthwise output the input's bytes (the input dies at the 1x1 conv in a block without a
 * residual), and the backend would have to run the two apart. The cost is at most that
 * input's bytes at one step, where it would have been reused.
 */
import type { Lifetime } from "./arena.ts";
import type { LNode } from "./ir.ts";

/** The activations the backend folds into either conv of the pair (conv_act_of in conv_act.h). */
const FOLDED_ACTIVATIONS = new Set(["Relu", "Clip", "HardSwish", "SiLU"]);

const ints = (v: unknown): number[] => (Array.isArray(v) ? (v as number[]) : []);

function isConv1x1(n: LNode): boolean {
  return n.op === "Conv" && ints(n.attrs.kernel).every((k) => k === 1) && ints(n.attrs.strides).every((s) => s === 1) &&
    ints(n.attrs.pads).every((p) => p === 0) && n.attrs.group === 1;
}

/** The step after the conv at `step` and its folded activation op, if one reads it alone; and the tensor that holds the result. */
function withActivation(nodes: readonly LNode[], step: number): { out: string; next: number } {
  const out = nodes[step]!.outputs[0]!;
  const a = nodes[step + 1];
  if (a && FOLDED_ACTIVATIONS.has(a.op) && a.inputs.length === 1 && a.inputs[0] === out) return { out: a.outputs[0]!, next: step + 2 };
  return { out, next: step + 1 };
}

/**
 * Every pair in `nodes`: the 1x1 conv's step, its input, and the pair's last step (the
 * depthwise conv's, or its activation's).
 */
export function pointwiseDepthwisePairs(nodes: readonly LNode[], shapes: ReadonlyMap<string, number[]>): Array<{ step: number; input: string; last: number }> {
  const pairs: Array<{ step: number; input: string; last: number }> = [];
  nodes.forEach((n, step) => {
    if (!isConv1x1(n)) return;
    const pw = withActivation(nodes, step);
    const dw = nodes[pw.next];
    const channels = shapes.get(pw.out)?.[1];
    if (!dw || dw.op !== "Conv" || dw.inputs[0] !== pw.out || channels === undefined || channels < 2 || dw.attrs.group !== channels) return;
    pairs.push({ step, input: n.inputs[0]!, last: withActivation(nodes, pw.next).next - 1 });
  });
  return pairs;
}

/** Keeps each pair's 1x1 conv input alive through the pair's last step (the header's why). */
export function keepPairInputs(nodes: readonly LNode[], shapes: ReadonlyMap<string, number[]>, lives: Lifetime[]): void {
  const byName = new Map(lives.map((l) => [l.name, l]));
  for (const p of pointwiseDepthwisePairs(nodes, shapes)) {
    const l = byName.get(p.input);
    if (l) l.last = Math.max(l.last, p.last);
  }
}
