/**
 * Attention as exporters emit it, MatMul(Q, K^T) -> Mul/Div by a scalar -> Add mask ->
 * Softmax(last axis) -> MatMul(., V), becomes one Attention op. What it saves is memory: the
 * [.., S, T] scores, their scaled and masked copies and the probabilities are never stored
 * (the kernel keeps a block of rows at a time), and those are the largest activations of a
 * transformer layer once S exceeds the model width.
 */
import { broadcastDims } from "./fold-math.ts";
import { fuseAll, type GraphIndex, otherInput } from "./fuse-match.ts";
import type { Inferred } from "./infer.ts";
import { type LNode, BATCH } from "./ir.ts";

function sameDims(a: number[] | undefined, b: number[] | undefined): boolean {
  return !!a && !!b && a.length === b.length && a.every((d, i) => d === b[i]);
}

function matchAt(g: GraphIndex, qk: LNode): { nodes: LNode[]; fused: LNode } | undefined {
  const inf = g.inf;
  const [q, kt] = qk.inputs as [string, string];
  const qs = inf.shapes.get(q), ks = inf.shapes.get(kt);
  // Two activations of equal leading dims (the per-head slices of one batch), rank >= 3.
  if (!qs || !ks || g.isConst(q) || g.isConst(kt) || qs.length < 3 || !sameDims(qs.slice(0, -2), ks.slice(0, -2))) return undefined;
  // The Attention kernel runs the batch as its first leading dim (k = 1).
  if (qs[0] !== BATCH) return undefined;
  const nodes = [qk];
  let cur = qk.outputs[0]!;
  let scale = 1;
  let mask = "";
  let next = g.soleReader(cur);
  if (next && (next.op === "Mul" || next.op === "Div") && next.inputs[0] === cur) {
    const c = g.scalar(next.inputs[1]);
    if (c === undefined || c === 0) return undefined;
    scale = next.op === "Mul" ? c : 1 / c;
    nodes.push(next);
    cur = next.outputs[0]!;
    next = g.soleReader(cur);
  } else if (next && next.op === "Mul" && g.scalar(next.inputs[0]) !== undefined) {
    scale = g.scalar(next.inputs[0])!;
    nodes.push(next);
    cur = next.outputs[0]!;
    next = g.soleReader(cur);
  }
  const scoreShape = inf.shapes.get(cur)!;
  if (next && next.op === "Add") {
    const m = otherInput(next, cur);
    const ms = m && (inf.consts.get(m)?.dims ?? inf.shapes.get(m));
    // The mask must broadcast to the scores without changing them (no batch from a weight).
    if (!m || !ms || !sameDims(broadcastDims(ms, scoreShape), scoreShape)) return undefined;
    if (!g.isConst(m) && ms.length !== scoreShape.length) return undefined;
    if (g.isConst(m) && ms.length === scoreShape.length && ms[0] !== 1) return undefined;
    mask = m;
    nodes.push(next);
    cur = next.outputs[0]!;
    next = g.soleReader(cur);
  }
  if (!next || next.op !== "Softmax" || next.attrs.axis !== scoreShape.length - 1) return undefined;
  nodes.push(next);
  const pv = g.soleReader(next.outputs[0]!, "MatMul");
  const v = pv && pv.inputs[0] === next.outputs[0] ? pv.inputs[1]! : undefined;
  const vs = v && inf.shapes.get(v);
  if (!pv || !v || g.isConst(v) || !vs || !sameDims(vs.slice(0, -2), qs.slice(0, -2)) || vs[vs.length - 2] !== ks[ks.length - 1]) return undefined;
  nodes.push(pv);
  const fused: LNode = { op: "Attention", name: `${qk.name}.attention`, inputs: [q, kt, v, mask], outputs: [pv.outputs[0]!], attrs: { scale } };
  return { nodes, fused };
}

/** Fuse every attention chain; returns how many were fused. */
export function fuseAttention(inf: Inferred): number {
  return fuseAll(inf, (g, n) => (n.op === "MatMul" ? matchAt(g, n) : undefined));
}
