/**
 * The order ONNX Runtime runs a graph's nodes in (its default execution order), which decides
 * which tensors are alive together and so the memory pattern (ort-pattern.ts). ORT does not run
 * the file's order: its GraphViewer walks the graph backwards from the nodes no other node
 * reads (last of them first), visiting a node's producers highest node index first, and emits
 * each node once all its producers are emitted (a post-order reverse DFS, ties broken by node
 * index: onnxruntime/core/graph/graph_viewer.cc). A torchvision ViT's attention computes the
 * scale of q from q's shape, so its k path waits for q's: the file's order keeps the qkv block
 * alive past the k and v branches it does not reach in ORT.
 */
import type { Node } from "../compiler/ir.ts";

/** The nodes in ORT's default execution order; the node index is the position in `nodes` (the file's order). */
export function ortExecutionOrder<N extends Pick<Node, "inputs" | "outputs">>(nodes: readonly N[]): N[] {
  return walkBack(nodes, (a, b) => a - b);
}

/**
 * The post-order of a walk back from the nodes no other node reads: a node is emitted once its
 * producers are. `pushOrder` sorts the roots and each node's producers in the order they are
 * pushed; the last pushed is visited first.
 */
function walkBack<N extends Pick<Node, "inputs" | "outputs">>(nodes: readonly N[], pushOrder: (a: number, b: number) => number): N[] {
  const producer = new Map<string, number>();
  nodes.forEach((n, i) => {
    for (const o of n.outputs) if (o) producer.set(o, i);
  });
  const producers = nodes.map((n, i) => [...new Set(n.inputs.flatMap((x) => (x && producer.has(x) && producer.get(x) !== i ? [producer.get(x)!] : [])))].sort(pushOrder));
  const hasReader = new Array<boolean>(nodes.length).fill(false);
  for (const ps of producers) for (const p of ps) hasReader[p] = true;
  const stack: Array<[number, boolean]> = nodes.map((_, i) => i).filter((i) => !hasReader[i]).sort(pushOrder).map((i) => [i, false]);
  const visited = new Array<boolean>(nodes.length).fill(false);
  const out: N[] = [];
  while (stack.length > 0) {
    const [i, leave] = stack.pop()!;
    if (leave) {
      out.push(nodes[i]!);
      continue;
    }
    if (visited[i]) continue;
    visited[i] = true;
    stack.push([i, true]);
    for (const p of producers[i]!) stack.push([p, false]);
  }
  return out;
}

/**
 * `lowered` (memlane's inferred nodes: shape-only nodes folded away, a few ops split in two)
 * in the order ORT runs the ONNX nodes they came from, `onnx`. The order is taken from the
 * ONNX graph because its shape computations are edges ORT's walk follows. A lowered node is
 * matched to the ONNX node by an output they share; one that shares none (the first half of a
 * split op) runs just before its first reader, else right after the node before it. A
 * topological pass (lowest rank ready first) keeps every producer before its readers.
 */
export function inOrtOrder<L extends Pick<Node, "inputs" | "outputs">>(lowered: readonly L[], onnx: readonly Pick<Node, "inputs" | "outputs">[]): L[] {
  const rankOf = new Map<string, number>();
  ortExecutionOrder(onnx).forEach((n, i) => {
    for (const o of n.outputs) if (o) rankOf.set(o, i);
  });
  const producer = new Map<string, number>();
  lowered.forEach((n, i) => {
    for (const o of n.outputs) if (o) producer.set(o, i);
  });
  const rank: Array<number | undefined> = lowered.map((n) => {
    const own = n.outputs.flatMap((o) => (rankOf.has(o) ? [rankOf.get(o)!] : []));
    return own.length > 0 ? Math.min(...own) : undefined;
  });
  for (let i = lowered.length - 1; i >= 0; i--) {
    if (rank[i] !== undefined) continue;
    const outs = new Set(lowered[i]!.outputs);
    const readers = lowered.flatMap((n, j) => (rank[j] !== undefined && n.inputs.some((x) => outs.has(x)) ? [rank[j]!] : []));
    if (readers.length > 0) rank[i] = Math.min(...readers) - 1e-6;
  }
  for (let i = 0; i < lowered.length; i++) rank[i] ??= (i > 0 ? rank[i - 1]! : -1) + 1e-6;
  const readers: number[][] = lowered.map(() => []);
  const waiting = lowered.map((n, i) => {
    const ps = new Set(n.inputs.flatMap((x) => (x && producer.has(x) && producer.get(x) !== i ? [producer.get(x)!] : [])));
    for (const p of ps) readers[p]!.push(i);
    return ps.size;
  });
  const ready = lowered.flatMap((_, i) => (waiting[i] === 0 ? [i] : []));
  const out: L[] = [];
  while (ready.length > 0) {
    ready.sort((a, b) => rank[a]! - rank[b]! || a - b);
    const i = ready.shift()!;
    out.push(lowered[i]!);
    for (const r of readers[i]!) if (--waiting[r]! === 0) ready.push(r);
  }
  return out;
}

/**
 * `nodes` (the graph after every rewrite) in the order ORT runs them: its walk (ortExecutionOrder)
 * over the graph it ends with, each node keyed by ORT's number for it. A node ORT keeps keeps
 * its number, its position in the file (`fileIndexOf`: the ONNX node it stands for). A node a
 * rewrite made (`created`, in the order the rewrites make them) is numbered after every other,
 * so it is the producer ORT's walk visits first: shufflenet_v2_x2_0's downsampling blocks run
 * their NCHWc-rebuilt branch first (ORT's pattern at batch 1 was 17 % over a replay in the
 * file's order).
 *
 * The walk is made on the final graph, not the file's, because the rewrites change its edges:
 * ORT's common subexpression elimination keeps the first of a SegFormer stage's equal
 * Unsqueezes of the patch grid's height (block 1's, first in ORT's walk) and every block then
 * reads it, so ORT computes the grid's shape values before block 0 and keeps them to the last
 * block; the transpose optimizer makes a Shape of a transposed value read the value before the
 * Transpose (ortShapesBeforeTransposes). Walking the file's edges put those elsewhere; with the
 * shape values' lifetimes right (ort-run-time.ts withRunTimeReads) that moved DeiT's pattern 6 %.
 */
export function ortOrderOfFinalGraph<N extends Pick<Node, "inputs" | "outputs">>(nodes: readonly N[], fileIndexOf: (n: N) => number | undefined, created: readonly N[]): N[] {
  const createdAt = new Map<N, number>(created.map((n, i) => [n, i]));
  const fileCount = Math.max(0, ...nodes.map((n) => (createdAt.has(n) ? 0 : (fileIndexOf(n) ?? 0) + 1)));
  const key = nodes.map((n, i) => (createdAt.has(n) ? fileCount + createdAt.get(n)! : fileIndexOf(n) ?? fileCount + created.length + i));
  return walkBack(nodes, (a, b) => key[a]! - key[b]!);
}
