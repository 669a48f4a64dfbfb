/**
 * Topological order of the nodes (Kahn), stable in the file's order so that plans are
 * reproducible and a model that is already sorted keeps its order.
 */
import { CompileError } from "./errors.ts";
import type { Graph, Node } from "./ir.ts";

export function topoSort(g: Graph, nodes: Node[] = g.nodes): Node[] {
  const producer = new Map<string, number>();
  nodes.forEach((n, i) => {
    for (const o of n.outputs) if (o) producer.set(o, i);
  });
  const indeg = new Array<number>(nodes.length).fill(0);
  const users: number[][] = nodes.map(() => []);
  nodes.forEach((n, i) => {
    const deps = new Set<number>();
    for (const inp of n.inputs) {
      if (!inp) continue;
      const p = producer.get(inp);
      if (p !== undefined) deps.add(p);
      else if (!g.consts.has(inp) && !g.inputs.some((x) => x.name === inp)) {
        throw new CompileError(`${g.file}: ${n.opType} node "${n.name}" reads "${inp}", which no node, initializer or graph input provides`, "invalid-model", { node: n.name, tensor: inp });
      }
    }
    for (const d of deps) {
      users[d]!.push(i);
      indeg[i]!++;
    }
  });
  // A min-heap would be O(n log n); graphs here are small, a sorted ready list is plenty.
  const ready: number[] = [];
  indeg.forEach((d, i) => d === 0 && ready.push(i));
  const out: Node[] = [];
  while (ready.length > 0) {
    ready.sort((a, b) => a - b);
    const i = ready.shift()!;
    out.push(nodes[i]!);
    for (const u of users[i]!) if (--indeg[u]! === 0) ready.push(u);
  }
  if (out.length !== nodes.length) {
    const stuck = nodes.find((_, i) => indeg[i]! > 0)!;
    throw new CompileError(`${g.file}: the graph has a cycle through ${stuck.opType} node "${stuck.name}"`, "invalid-model", { node: stuck.name });
  }
  return out;
}
