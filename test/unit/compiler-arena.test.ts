import { describe, expect, it } from "vitest";
import { type Lifetime, aliasByteCopies, arenaProblems, lifetimes, lowerBound, planArena } from "../../src/compiler/arena.ts";
import type { LNode } from "../../src/compiler/ir.ts";
import type { PlanHeader, PlanOp, PlanTensor } from "../../src/compiler/plan-format.ts";
import { checkPlanArena } from "../../src/compiler/verify.ts";

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

describe("byte copies share their input's place (aliasByteCopies)", () => {
  const node = (op: string, inputs: string[], outputs: string[]): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs: {} });
  const shapes = new Map(["x", "a", "b", "c", "d", "e", "f"].map((n) => [n, [-1, 4, 8]]));

  it("aliases a chain of Reshapes whose inputs die there, and plans the group as one tensor", () => {
    // x -> Relu a -> Reshape b -> Transpose c -> Reshape d -> Flatten e (graph output)
    const nodes = [node("Relu", ["x"], ["a"]), node("Reshape", ["a"], ["b"]), node("Transpose", ["b"], ["c"]),
      node("Reshape", ["c"], ["d"]), node("Flatten", ["d"], ["e"])];
    const ls = lifetimes(nodes, ["x"], ["e"], shapes);
    const { planned, aliasOf } = aliasByteCopies(nodes, ls, ["x"], ["e"]);
    expect([...aliasOf.entries()].sort()).toEqual([["b", "a"], ["d", "c"], ["e", "c"]]);
    expect(planned.map((l) => l.name).sort()).toEqual(["a", "c", "x"]);
    const c = planned.find((l) => l.name === "c")!;
    expect([c.first, c.last]).toEqual([2, 4]);  // c's birth to e's end (a graph output)
    const a = planArena(planned);
    expect(arenaProblems(planned, a.offsets, a.bytesPerSample)).toEqual([]);
    // a (with b) and c (with d, e) overlap at the Transpose: distinct places
    expect(a.offsets.get("a")).not.toBe(a.offsets.get("c"));
  });

  it("copies where the input lives on, is a graph input or output, or differs in size", () => {
    const sized = new Map([...shapes, ["f", [-1, 4, 4]]]);
    const nodes = [node("Reshape", ["x"], ["a"]), node("Relu", ["a"], ["b"]), node("Reshape", ["b"], ["c"]),
      node("Add", ["b", "c"], ["d"]), node("Reshape", ["d"], ["e"]), node("Slice", ["e"], ["f"])];
    const ls = lifetimes(nodes, ["x"], ["d", "f"], sized);
    const { planned, aliasOf } = aliasByteCopies(nodes, ls, ["x"], ["d", "f"]);
    // x: a graph input; b: read again by the Add; d: a graph output
    expect(aliasOf.size).toBe(0);
    expect(planned.length).toBe(ls.length);
  });
});

describe("checkPlanArena on byte copies placed on their input", () => {
  // x (input) -> Relu a -> Reshape b -> Relu c (output); a at 0, b at `bOffset`, c above
  const header = (bOffset: number, aReadAgain: boolean): PlanHeader => {
    const t = (name: string, offset: number): PlanTensor => ({ name, dtype: "float32", shape: [-1, 16], kind: "activation", offset, bytes: 64 });
    const op = (o: string, inputs: number[], outputs: number[]): PlanOp => ({ op: o, name: o, inputs, outputs, attrs: {} });
    return {
      producer: "test", source: "test",
      tensors: [t("x", 128), t("a", 0), t("b", bOffset), t("c", 192)],
      inputs: [0], outputs: [3],
      ops: [op("Relu", [0], [1]), op("Reshape", [1], [2]), op("Add", aReadAgain ? [2, 1] : [2, 2], [3])],
      arena: { bytesPerSample: 256, lowerBoundPerSample: 0, alignment: 64 },
    };
  };
  it("accepts the copy on its dying input, flags it where the input lives on", () => {
    expect(checkPlanArena(header(0, false)).problems).toEqual([]);
    expect(checkPlanArena(header(64, false)).problems).toEqual([]);  // a plain copy elsewhere
    expect(checkPlanArena(header(0, true)).problems.length).toBeGreaterThan(0);  // a is read after b is written
  });
});
