/**
 * Activation arena planning, per sample (docs/plan-format.md, "Batch scaling").
 * Offsets come from "greedy by size" (Pisarchyk & Lee 2020, Efficient Memory Management
 * for Deep Neural Net Inference, section 4.3): largest tensor first, each placed in the
 * smallest gap between time-overlapping tensors that fits it, else on top. The same
 * placement is also run over a few other orders and the smallest arena kept (planArena).
 */
import { CompileError } from "./errors.ts";
import { type LNode, perSample } from "./ir.ts";
import { PLAN_ALIGNMENT, alignUp } from "./plan-format.ts";

export interface Lifetime {
  name: string;
  /** Bytes per sample, unaligned (what the plan records). */
  bytes: number;
  /** Bytes per sample rounded up to the alignment (what the tensor occupies). */
  size: number;
  /** First and last op step (inclusive) at which the tensor must hold its value. */
  first: number;
  last: number;
}

export interface Arena {
  offsets: Map<string, number>;
  bytesPerSample: number;
  lowerBoundPerSample: number;
}

/** Graph inputs live from step 0, outputs to the last step, others from producer to last reader. */
export function lifetimes(nodes: readonly LNode[], inputs: readonly string[], outputs: readonly string[], shapes: ReadonlyMap<string, number[]>, elemBytes: (name: string) => number = () => 4): Lifetime[] {
  const end = Math.max(nodes.length - 1, 0);
  const life = new Map<string, Lifetime>();
  const add = (name: string, step: number) => {
    const bytes = perSample(shapes.get(name)!) * elemBytes(name);
    life.set(name, { name, bytes, size: alignUp(bytes, PLAN_ALIGNMENT), first: step, last: step });
  };
  for (const i of inputs) add(i, 0);
  nodes.forEach((n, step) => {
    for (const i of n.inputs) {
      const l = life.get(i);
      if (l) l.last = Math.max(l.last, step);
    }
    for (const o of n.outputs) if (o) add(o, step);
  });
  for (const o of outputs) life.get(o)!.last = end;
  return [...life.values()];
}

/** Ops whose output is their input's bytes unchanged (the runtimes copy them byte for byte). */
const BYTE_COPIES = new Set(["Reshape", "Flatten"]);

/**
 * A Reshape or Flatten whose input dies at it shares its input's place: the two become one
 * lifetime (the input's birth to the output's last read), planned under the input's name, and
 * the runtimes skip the copy of a tensor onto itself. An input that is a graph input or output
 * keeps its own place (the output may be a graph output). Returns the lifetimes to plan and, per aliased output, the name whose offset it takes.
 * (ShuffleNet's channel shuffle is Concat -> Reshape -> Transpose -> Reshape: two of its four
 * passes over the tensor were such copies.)
 */
export function aliasByteCopies(nodes: readonly LNode[], ls: readonly Lifetime[], inputs: readonly string[], outputs: readonly string[]): { planned: Lifetime[]; aliasOf: Map<string, string> } {
  const own = new Map(ls.map((l) => [l.name, l]));
  const byName = new Map(ls.map((l) => [l.name, { ...l }]));  // the groups, under their first tensor
  const aliasOf = new Map<string, string>();
  const root = (n: string): string => aliasOf.get(n) ?? n;
  nodes.forEach((n, step) => {
    if (!BYTE_COPIES.has(n.op)) return;
    const x = n.inputs[0], y = n.outputs[0];
    if (!x || !y || inputs.includes(x) || outputs.includes(x)) return;
    const ox = own.get(x), lx = byName.get(root(x)), ly = byName.get(y);
    if (!ox || !lx || !ly || ly.bytes !== ox.bytes || ox.last !== step) return;
    // The group (one size: the bytes are equal) now lives until the output's last read.
    lx.last = Math.max(lx.last, ly.last);
    aliasOf.set(y, root(x));
    byName.delete(y);
  });
  return { planned: [...byName.values()], aliasOf };
}

function overlapsInTime(a: Lifetime, b: Lifetime): boolean {
  return a.first <= b.last && b.first <= a.last;
}

type Order = (a: Lifetime, b: Lifetime) => number;

const byName = (a: Lifetime, b: Lifetime) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
const span = (l: Lifetime) => l.last - l.first;

/**
 * Orders tried, best result kept. The first is the paper's (size, largest first); the
 * others break its blind spot on graphs where a large short-lived tensor placed first
 * pins a small long-lived one above it (see the bn-standalone fixture).
 */
const ORDERS: Order[] = [
  (a, b) => b.size - a.size || a.first - b.first || byName(a, b),
  (a, b) => span(b) - span(a) || b.size - a.size || a.first - b.first || byName(a, b),
  (a, b) => b.size * (span(b) + 1) - a.size * (span(a) + 1) || a.first - b.first || byName(a, b),
];

/** Seeded PRNG (mulberry32) so that plans are reproducible. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Best of the fixed orders, then of seeded random orders (same best-fit placement) while
 * the lower bound is not reached; the work is capped so large graphs stay fast.
 */
export function planArena(ls: readonly Lifetime[]): Arena {
  const bound = lowerBound(ls);
  let best: { offsets: Map<string, number>; total: number } | undefined;
  const consider = (order: Lifetime[]) => {
    const r = greedy(order);
    if (!best || r.total < best.total) best = r;
  };
  for (const order of ORDERS) consider([...ls].sort(order));
  const tries = Math.min(256, Math.floor(2_000_000 / Math.max(1, ls.length * ls.length)));
  const rand = rng(0x6d656d6c);
  for (let k = 0; k < tries && best!.total > bound; k++) {
    const order = [...ls];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    consider(order);
  }
  return { offsets: best!.offsets, bytesPerSample: best!.total, lowerBoundPerSample: bound };
}

/** Place tensors in the given order, each in the smallest fitting gap among time-overlapping ones. */
function greedy(order: readonly Lifetime[]): { offsets: Map<string, number>; total: number } {
  const placed: { l: Lifetime; offset: number }[] = []; // kept sorted by offset
  const offsets = new Map<string, number>();
  let total = 0;
  for (const t of order) {
    let prev = 0;
    let best: number | undefined;
    let bestGap = Infinity;
    for (const p of placed) {
      if (!overlapsInTime(p.l, t)) continue;
      const gap = p.offset - prev;
      if (gap >= t.size && gap < bestGap) {
        bestGap = gap;
        best = prev;
      }
      prev = Math.max(prev, p.offset + p.l.size);
    }
    const offset = best ?? prev;
    offsets.set(t.name, offset);
    placed.push({ l: t, offset });
    placed.sort((a, b) => a.offset - b.offset);
    total = Math.max(total, offset + t.size);
  }
  return { offsets, total };
}

/** The largest total (aligned) size of tensors alive at one op step: no arena can be smaller. */
export function lowerBound(ls: readonly Lifetime[]): number {
  const steps = Math.max(0, ...ls.map((l) => l.last)) + 1;
  let best = 0;
  for (let s = 0; s < steps; s++) {
    let sum = 0;
    for (const l of ls) if (l.first <= s && s <= l.last) sum += l.size;
    best = Math.max(best, sum);
  }
  return best;
}

/** Every problem with an assignment: misalignment, out of range, or live tensors that overlap. */
export function arenaProblems(ls: readonly Lifetime[], offsets: ReadonlyMap<string, number>, bytesPerSample: number): string[] {
  const problems: string[] = [];
  for (const l of ls) {
    const o = offsets.get(l.name);
    if (o === undefined) problems.push(`"${l.name}" has no offset`);
    else if (o % PLAN_ALIGNMENT !== 0) problems.push(`"${l.name}" offset ${o} is not ${PLAN_ALIGNMENT}-aligned`);
    else if (o + l.bytes > bytesPerSample) problems.push(`"${l.name}" [${o}, ${o + l.bytes}) exceeds the arena (${bytesPerSample})`);
  }
  for (let i = 0; i < ls.length; i++) {
    for (let j = i + 1; j < ls.length; j++) {
      const a = ls[i]!, b = ls[j]!;
      if (!overlapsInTime(a, b)) continue;
      const oa = offsets.get(a.name) ?? 0, ob = offsets.get(b.name) ?? 0;
      if (oa < ob + b.bytes && ob < oa + a.bytes) {
        problems.push(`"${a.name}" [${oa}, ${oa + a.bytes}) steps ${a.first}-${a.last} overlaps "${b.name}" [${ob}, ${ob + b.bytes}) steps ${b.first}-${b.last}`);
      }
    }
  }
  return problems;
}

export function checkArena(ls: readonly Lifetime[], offsets: ReadonlyMap<string, number>, bytesPerSample: number): void {
  const p = arenaProblems(ls, offsets, bytesPerSample);
  if (p.length > 0) throw new CompileError(`arena plan is invalid: ${p.slice(0, 5).join("; ")}`, "internal", { problems: p });
}
