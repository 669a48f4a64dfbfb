/**
 * Pattern-matching helpers for the fusion passes (fuse-layernorm.ts, fuse-gelu.ts): who
 * produces and who reads a tensor in the inferred graph, and scalar constants. A fusion may
 * only swallow an intermediate tensor that no other node and no graph output reads.
 */
import type { Inferred } from "./infer.ts";
import type { LNode } from "./ir.ts";

export class GraphIndex {
  private producers = new Map<string, LNode>();
  private readers = new Map<string, LNode[]>();
  private outputs: Set<string>;

  constructor(readonly inf: Inferred) {
    this.outputs = new Set(inf.outputs);
    for (const n of inf.nodes) {
      for (const o of n.outputs) this.producers.set(o, n);
      for (const i of n.inputs) if (i) this.readers.set(i, [...(this.readers.get(i) ?? []), n]);
    }
  }

  producer(name: string, op?: string): LNode | undefined {
    const p = this.producers.get(name);
    return p && (op === undefined || p.op === op) ? p : undefined;
  }

  readersOf(name: string): LNode[] {
    return this.readers.get(name) ?? [];
  }

  /** The single node reading `name` (of type `op`), when nothing else (nor an output) does. */
  soleReader(name: string, op?: string): LNode | undefined {
    const r = this.readersOf(name);
    if (r.length !== 1 || this.outputs.has(name)) return undefined;
    return op === undefined || r[0]!.op === op ? r[0] : undefined;
  }

  /** True when every read of `name` is by one of `nodes`, and it is no graph output. */
  readOnlyBy(name: string, nodes: LNode[]): boolean {
    return !this.outputs.has(name) && this.readersOf(name).every((r) => nodes.includes(r));
  }

  /** The value of a one-element float constant, or undefined. */
  scalar(name: string | undefined): number | undefined {
    const c = name ? this.inf.consts.get(name) : undefined;
    return c && c.data.length === 1 ? c.data[0] : undefined;
  }

  isConst(name: string): boolean {
    return this.inf.consts.has(name);
  }
}

/** Two-input node's other input, when one of them is `name`. */
export function otherInput(n: LNode, name: string): string | undefined {
  if (n.inputs.length !== 2) return undefined;
  if (n.inputs[0] === name) return n.inputs[1];
  if (n.inputs[1] === name) return n.inputs[0];
  return undefined;
}

export function near(v: number | undefined, want: number, rel = 1e-5): boolean {
  return v !== undefined && Math.abs(v - want) <= rel * Math.abs(want);
}

/**
 * Replace matched nodes: `removed` disappear, `replacement` takes the place of the last one
 * in execution order (every input of the fused op is computed before the last matched node),
 * and the shapes of the swallowed intermediates are forgotten.
 */
export function replaceNodes(inf: Inferred, removed: LNode[], replacement: LNode): void {
  const gone = new Set(removed);
  const last = Math.max(...removed.map((n) => inf.nodes.indexOf(n)));
  const anchor = inf.nodes[last]!;
  for (const n of removed) for (const o of n.outputs) if (!replacement.outputs.includes(o)) inf.shapes.delete(o);
  inf.nodes = inf.nodes.flatMap((n) => (n === anchor ? [replacement] : gone.has(n) ? [] : [n]));
}

/** What a fusion's matcher returns at a node: the nodes it replaces and their replacement. */
export interface FusionHit {
  nodes: LNode[];
  fused: LNode;
}

/**
 * Applies a fusion until no node matches: one match at a time, re-indexing the graph after
 * each replacement (a fused chain changes readers and producers). Returns how many fused.
 */
export function fuseAll(inf: Inferred, matchAt: (g: GraphIndex, n: LNode) => FusionHit | undefined): number {
  let fused = 0;
  for (let again = true; again; ) {
    again = false;
    const g = new GraphIndex(inf);
    for (const n of inf.nodes) {
      const hit = matchAt(g, n);
      if (!hit) continue;
      replaceNodes(inf, hit.nodes, hit.fused);
      fused++;
      again = true;
      break;
    }
  }
  return fused;
}
