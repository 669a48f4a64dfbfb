/**
 * LayerNorm from its primitives, as exporters before opset 17 (and hand-written norms) emit it:
 *   m = ReduceMean(x, trailing axes), d = x - m, v = ReduceMean(d^2 or d*d), s = Sqrt(v + eps),
 *   n = d / s (or d * Reciprocal(s)), then optionally n * gamma and + beta
 * becomes one LayerNormalization op: one read of x instead of nine passes over the activation.
 */
import { mk } from "./fold-math.ts";
import { fuseAll, type GraphIndex, otherInput } from "./fuse-match.ts";
import type { Inferred } from "./infer.ts";
import { type ConstTensor, type LNode, numel } from "./ir.ts";
import { expandTo } from "./ops-transformer.ts";

function trailingAxis(mean: LNode, rank: number): number | undefined {
  const axes = mean.attrs.axes as number[] | undefined;
  if (!axes || mean.attrs.keepdims !== 1 || axes.length === 0) return undefined;
  return axes.every((a, i) => a === rank - axes.length + i) ? axes[0] : undefined;
}

/** Name of a weight equal to `name` broadcast to exactly `norm`, or undefined if it does not fit. */
function affine(inf: Inferred, name: string, norm: number[], base: string): string | undefined {
  const c = inf.consts.get(name);
  const full = c && expandTo(c, norm);
  return full && fresh(inf, base, full);
}

function fresh(inf: Inferred, base: string, t: ConstTensor): string {
  let name = base;
  for (let k = 1; inf.consts.has(name) || inf.shapes.has(name); k++) name = `${base}_${k}`;
  inf.consts.set(name, t);
  return name;
}

function matchAt(g: GraphIndex, mean: LNode): { nodes: LNode[]; fused: LNode } | undefined {
  const inf = g.inf;
  const x = mean.inputs[0]!;
  const shape = inf.shapes.get(x);
  if (!shape) return undefined;
  const axis = trailingAxis(mean, shape.length);
  if (axis === undefined || axis < 1) return undefined;
  const sub = g.soleReader(mean.outputs[0]!, "Sub");
  if (!sub || sub.inputs[0] !== x) return undefined;
  const d = sub.outputs[0]!;
  const sq = g.readersOf(d).find((n) => (n.op === "Pow" && n.attrs.exponent === 2) || (n.op === "Mul" && n.inputs[0] === d && n.inputs[1] === d));
  const variance = sq && g.soleReader(sq.outputs[0]!, "ReduceMean");
  if (!variance || trailingAxis(variance, shape.length) !== axis) return undefined;
  const addEps = g.soleReader(variance.outputs[0]!, "Add");
  const eps = addEps && g.scalar(otherInput(addEps, variance.outputs[0]!));
  const sqrt = addEps && g.soleReader(addEps.outputs[0]!, "Sqrt");
  if (eps === undefined || !sqrt) return undefined;
  const nodes = [mean, sub, sq, variance, addEps, sqrt];
  let normed: string;
  const div = g.soleReader(sqrt.outputs[0]!, "Div");
  if (div && div.inputs[0] === d) {
    nodes.push(div);
    normed = div.outputs[0]!;
  } else {
    const recip = g.soleReader(sqrt.outputs[0]!, "Reciprocal");
    const mul = recip && g.soleReader(recip.outputs[0]!, "Mul");
    if (!recip || !mul || otherInput(mul, recip.outputs[0]!) !== d) return undefined;
    nodes.push(recip, mul);
    normed = mul.outputs[0]!;
  }
  if (!g.readOnlyBy(d, nodes)) return undefined;
  const norm = shape.slice(axis);
  let out = normed;
  let scale: string | undefined;
  let bias = "";
  const gm = g.soleReader(out, "Mul");
  const gName = gm && otherInput(gm, out);
  if (gm && gName && (scale = affine(inf, gName, norm, `${gName}.ln`))) {
    nodes.push(gm);
    out = gm.outputs[0]!;
    const ba = g.soleReader(out, "Add");
    const bName = ba && otherInput(ba, out);
    const b = bName && affine(inf, bName, norm, `${bName}.ln`);
    if (ba && b) {
      nodes.push(ba);
      out = ba.outputs[0]!;
      bias = b;
    }
  }
  scale ??= fresh(inf, `${mean.name}.ln_ones`, mk(true, norm, new Array<number>(numel(norm)).fill(1)));
  const fused: LNode = { op: "LayerNormalization", name: `${mean.name}.layernorm`, inputs: [x, scale, bias], outputs: [out], attrs: { axis, epsilon: eps } };
  return { nodes, fused };
}

/** Fuse every decomposed LayerNorm; returns how many were fused. */
export function fuseLayerNorm(inf: Inferred): number {
  return fuseAll(inf, (g, n) => (n.op === "ReduceMean" ? matchAt(g, n) : undefined));
}
