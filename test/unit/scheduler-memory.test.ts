// The scheduler's memory budget: stages with predicted peaks start together only while the
// predictions fit; one predicted above the whole budget fails before it starts, naming the
// prediction and its parts; stages without a prediction keep the concurrency rules alone.
import { describe, expect, it } from "vitest";
import { type DagNode, MemoryBudgetError, runDag, StageError } from "../../src/pipeline/scheduler.ts";

function stage(name: string, peakMiB: number | null, live: { now: number; max: number; started: string[] }): DagNode<string> {
  return {
    name,
    after: [],
    predictPeak: async () => (peakMiB === null ? null : { peakMiB, parts: `${name}: fixed ${peakMiB} MiB` }),
    run: async () => {
      live.started.push(name);
      live.now++;
      live.max = Math.max(live.max, live.now);
      await new Promise((r) => setTimeout(r, 20));
      live.now--;
      return name;
    },
  };
}

describe("runDag with a memory budget", () => {
  it("runs predicted stages together only while their peaks fit", async () => {
    const live = { now: 0, max: 0, started: [] as string[] };
    const nodes = ["a", "b", "c", "d"].map((n) => stage(n, 600, live));
    await runDag(nodes, { concurrency: 4, memory: { budgetMiB: 1300 } });
    expect(live.max).toBe(2); // 2 x 600 fit in 1300, 3 x 600 do not
    const free = { now: 0, max: 0, started: [] as string[] };
    await runDag(["a", "b", "c", "d"].map((n) => stage(n, 600, free)), { concurrency: 4, memory: { budgetMiB: 10_000 } });
    expect(free.max).toBe(4);
  });

  it("leaves stages without a prediction to the concurrency limit", async () => {
    const live = { now: 0, max: 0, started: [] as string[] };
    await runDag(["a", "b", "c"].map((n) => stage(n, null, live)), { concurrency: 3, memory: { budgetMiB: 1 } });
    expect(live.max).toBe(3);
  });

  it("fails a stage predicted above the whole budget before it starts, naming the prediction and its parts", async () => {
    const live = { now: 0, max: 0, started: [] as string[] };
    const err = await runDag([stage("big", 5000, live)], { concurrency: 1, memory: { budgetMiB: 2048 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StageError);
    expect((err as StageError).stage).toBe("big");
    expect((err as StageError).cause).toBeInstanceOf(MemoryBudgetError);
    expect((err as Error).message).toMatch(/predicted peak 5000.0 MiB exceeds the memory budget of 2048.0 MiB \(big: fixed 5000 MiB\)/);
    expect(live.started).toEqual([]);
  });

  it("takes a non-finite prediction for none: the stage runs, not 'can never start'", async () => {
    const live = { now: 0, max: 0, started: [] as string[] };
    await runDag([stage("nan", Number.NaN, live), stage("inf", Number.POSITIVE_INFINITY, live)], { concurrency: 2, memory: { budgetMiB: 100 } });
    expect(live.started.sort()).toEqual(["inf", "nan"]);
  });

  it("ignores predictions without a budget", async () => {
    const live = { now: 0, max: 0, started: [] as string[] };
    await runDag([stage("big", 1e9, live)], { concurrency: 1 });
    expect(live.started).toEqual(["big"]);
  });
});
