/**
 * ORT's ConvMulFusion and ConvAddFusion (level-1 rewrites, so every level python-ort and
 * node-ort run): a Mul or Add by a per-channel constant that is a Conv's one reader is folded
 * into the conv's weight and bias. Its output is the conv's; the conv's own never exists.
 *
 * A frozen batch norm written out as `x * scale + shift` exports this way (transformers' DETR
 * and Conditional DETR backbones, torchvision's FrozenBatchNorm2d): torch folds a BatchNorm
 * module into the conv at export, but not these. ORT 1.32's optimized graph of a DETR keeps 4
 * of its 35 Muls (none after a conv); without this rule the replay's block at batch 8 was 58 %
 * over the one ORT asks for.
 *
 * ORT's conditions (conv_mul_fusion.cc, conv_add_fusion.cc): the conv's weight (and bias, if it
 * has one) constant, its weight of rank 3 or more; its output read by the Mul or Add alone and
 * not a graph output; the Mul's or Add's second input a constant (the first is the conv's), of
 * the weight's rank with the channels at axis 1 ([1, C, 1, 1]) or one less with them at axis 0
 * ([C, 1, 1]), every other dim 1; for a Mul, a scalar too.
 */
import type { LNode } from "../compiler/ir.ts";
import { readersOf } from "./ort-fusions.ts";

/** Whether `dims` broadcast over a conv of weight `w` per output channel (or, where `scalar`, are a scalar). */
function perChannel(dims: readonly number[], w: readonly number[], scalar: boolean): boolean {
  if (dims.length === 0) return scalar;
  const axis = dims.length === w.length ? 1 : dims.length === w.length - 1 ? 0 : -1;
  return axis >= 0 && dims[axis] === w[0] && dims.every((d, i) => i === axis || d === 1);
}

/**
 * The node list with every such Mul and Add folded into its conv, repeatedly (a conv, then its
 * scale, then its shift). `constDims`: a constant's dims (an initializer or a value ORT's
 * folding makes), undefined for anything else. `opset`: Conv-22 is not a version ORT's rules name.
 */
export function ortConvAffineFusion(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, opset: number, constDims: (name: string) => readonly number[] | undefined): LNode[] {
  if (opset >= 22) return [...nodes];
  let current = [...nodes];
  for (;;) {
    const readers = readersOf(current, graphOutputs);
    const removed = new Set<LNode>();
    const replaced = new Map<LNode, LNode>();
    for (const conv of current) {
      const y = conv.outputs[0];
      const w = constDims(conv.inputs[1] ?? "");
      if (conv.op !== "Conv" || !y || graphOutputs.has(y) || !w || w.length < 3 || replaced.has(conv)) continue;
      const bias = conv.inputs[2];
      if (bias && constDims(bias)?.join() !== String(w[0])) continue;
      const r = readers.get(y) ?? [];
      const next = r[0];
      if (r.length !== 1 || !next || (next.op !== "Mul" && next.op !== "Add") || next.inputs[0] !== y || !next.outputs[0] || removed.has(next)) continue;
      const c = constDims(next.inputs[1] ?? "");
      if (!c || !perChannel(c, w, next.op === "Mul")) continue;
      removed.add(next);
      replaced.set(conv, { ...conv, outputs: [next.outputs[0]] });
    }
    if (removed.size === 0) return current;
    current = current.filter((n) => !removed.has(n)).map((n) => replaced.get(n) ?? n);
  }
}
