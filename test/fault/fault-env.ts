/**
 * Shared by every fault test file (lifecycle*, attacks*): the seed and the scale.
 *
 * - MEMLANE_FAULT_SEED: the seed of every random choice (when to kill, which stage...);
 *   default: a fresh one, printed, so that a failing run can be replayed exactly.
 * - MEMLANE_FAULT_SCALE: multiplies every count (default 1; `npm run fuzz` uses 100).
 */
import { randomInt } from "node:crypto";

function envInt(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) throw new Error(`${name}: expected an integer >= ${min}, received ${JSON.stringify(raw)}`);
  return v;
}

export const FAULT_SEED = envInt("MEMLANE_FAULT_SEED", randomInt(1, 2 ** 31 - 1), 0);
export const FAULT_SCALE = envInt("MEMLANE_FAULT_SCALE", 1, 1);

/** `n` times the scale: how many tries a fault gets in this run. */
export const scaled = (n: number): number => Math.max(1, Math.round(n * FAULT_SCALE));

/** A seeded generator (mulberry32): `next()` in [0, 1). One per test file, from a label. */
export function rng(label: string): { next(): number; int(lo: number, hi: number): number; pick<T>(xs: readonly T[]): T } {
  let h = FAULT_SEED >>> 0;
  for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 2654435761) >>> 0;
  let a = h || 1;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), pick: (xs) => xs[Math.floor(next() * xs.length)]! };
}

/** Prints the seed and scale once per file, with how to replay. */
export function announce(file: string): void {
  console.log(`[fault] ${file}: seed ${FAULT_SEED}, scale ${FAULT_SCALE} (replay: MEMLANE_FAULT_SEED=${FAULT_SEED} MEMLANE_FAULT_SCALE=${FAULT_SCALE})`);
}

/** Tries and outcomes per fault, printed at the end of a file: the figures the closing note quotes. */
export class Tally {
  readonly #counts = new Map<string, Map<string, number>>();
  add(fault: string, outcome: string): void {
    const m = this.#counts.get(fault) ?? new Map<string, number>();
    m.set(outcome, (m.get(outcome) ?? 0) + 1);
    this.#counts.set(fault, m);
  }
  print(file: string): void {
    for (const [fault, m] of this.#counts) {
      const tries = [...m.values()].reduce((a, b) => a + b, 0);
      console.log(`[fault] ${file}: ${fault}: ${tries} tries: ${[...m].map(([o, n]) => `${n} ${o}`).join(", ")}`);
    }
  }
}
