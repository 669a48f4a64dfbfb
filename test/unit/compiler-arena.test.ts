import { describe, expect, it } from "vitest";
import { type Lifetime, arenaProblems, lowerBound, planArena } from "../../src/compiler/arena.ts";

const life = (name: string, bytes: number, first: number, last: number): Lifetime => ({ name, bytes, size: Math.ceil(bytes / 64) * 64, first, last });

/** Deterministic random lifetimes: n tensors over `steps` op steps. */
function randomLives(n: number, steps: number, seed: number): Lifetime[] {
  let s = seed;
  const r = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  return Array.from({ length: n }, (_, i) => {
    const first = Math.floor(r() * steps);
    return life(`t${i}`, 4 * (1 + Math.floor(r() * 4000)), first, Math.min(steps - 1, first + Math.floor(r() * 4)));
  });
}

describe("arena planning (greedy by size)", () => {
  it("reaches the lower bound on a chain and reuses memory", () => {
    const ls = [life("a", 4096, 0, 1), life("b", 8192, 1, 2), life("c", 1024, 2, 3), life("d", 4096, 3, 3)];
    const a = planArena(ls);
    expect(a.lowerBoundPerSample).toBe(8192 + 4096);
    expect(a.bytesPerSample).toBe(a.lowerBoundPerSample);
    expect(arenaProblems(ls, a.offsets, a.bytesPerSample)).toEqual([]);
  });

  it("rounds every tensor up to 64 bytes and aligns every offset", () => {
    const ls = [life("a", 40, 0, 1), life("b", 40, 1, 1)];
    const a = planArena(ls);
    expect(a.lowerBoundPerSample).toBe(128);
    expect([...a.offsets.values()].sort()).toEqual([0, 64]);
  });

  it("reaches the bound where the paper's order alone does not (large short-lived tensor first)", () => {
    // The bn-standalone fixture: out (576 B) is largest but only overlaps s.
    const ls = [life("x", 448, 0, 2), life("m", 448, 0, 1), life("bn", 448, 1, 2), life("s", 448, 2, 3), life("out", 576, 3, 3)];
    const a = planArena(ls);
    expect(a.bytesPerSample).toBe(1344);
    expect(arenaProblems(ls, a.offsets, a.bytesPerSample)).toEqual([]);
  });

  it("never overlaps live tensors and never beats the lower bound on random graphs", () => {
    for (let seed = 1; seed <= 30; seed++) {
      const ls = randomLives(60, 25, seed);
      const a = planArena(ls);
      expect(arenaProblems(ls, a.offsets, a.bytesPerSample)).toEqual([]);
      expect(a.bytesPerSample).toBeGreaterThanOrEqual(lowerBound(ls));
      expect(a.bytesPerSample % 64).toBe(0);
    }
  });

  it("the check reports overlapping live tensors and misalignment", () => {
    const ls = [life("a", 128, 0, 1), life("b", 128, 1, 2)];
    expect(arenaProblems(ls, new Map([["a", 0], ["b", 64]]), 256).join()).toMatch(/"a" .* overlaps "b"/);
    expect(arenaProblems(ls, new Map([["a", 0], ["b", 130]]), 512).join()).toMatch(/not 64-aligned/);
    expect(arenaProblems(ls, new Map([["a", 0], ["b", 192]]), 256).join()).toMatch(/exceeds the arena/);
    // Not live at the same time: sharing memory is fine.
    expect(arenaProblems([life("a", 128, 0, 0), life("b", 128, 1, 1)], new Map([["a", 0], ["b", 0]]), 128)).toEqual([]);
  });
});
