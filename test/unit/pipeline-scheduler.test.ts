import { describe, expect, it } from "vitest";
import { type DagNode, PipelineDefinitionError, runDag, StageError, validateDag } from "../../src/pipeline/scheduler.ts";

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new Error("aborted"));
    });
  });

function node(name: string, after: string[], ms: number, log: string[], extra: Partial<DagNode<string>> = {}): DagNode<string> {
  return {
    name,
    after,
    run: async (signal) => {
      log.push(`start:${name}`);
      await sleep(ms, signal);
      log.push(`end:${name}`);
      return name;
    },
    ...extra,
  };
}

describe("DAG scheduler", () => {
  it("runs stages after their dependencies", async () => {
    const log: string[] = [];
    const nodes = [node("c", ["a", "b"], 5, log), node("a", [], 10, log), node("b", ["a"], 5, log), node("d", [], 1, log)];
    const results = await runDag(nodes, { concurrency: 2 });
    expect([...results.keys()].sort()).toEqual(["a", "b", "c", "d"]);
    const at = (e: string): number => log.indexOf(e);
    expect(at("start:b")).toBeGreaterThan(at("end:a"));
    expect(at("start:c")).toBeGreaterThan(at("end:b"));
  });

  it("never runs more than `concurrency` stages at once, and runs independent ones together", async () => {
    let now = 0;
    let max = 0;
    const nodes: DagNode<number>[] = Array.from({ length: 6 }, (_, i) => ({
      name: `s${i}`,
      after: [],
      run: async () => {
        now++;
        max = Math.max(max, now);
        await sleep(15);
        now--;
        return i;
      },
    }));
    await runDag(nodes, { concurrency: 2 });
    expect(max).toBe(2);
    max = 0;
    await runDag(nodes, { concurrency: 3 });
    expect(max).toBe(3);
  });

  it("runs an exclusive stage alone", async () => {
    const log: string[] = [];
    const nodes = [node("a", [], 20, log), node("x", [], 10, log, { exclusive: true }), node("b", [], 20, log)];
    await runDag(nodes, { concurrency: 2 });
    const x0 = log.indexOf("start:x");
    const x1 = log.indexOf("end:x");
    expect(x1).toBe(x0 + 1); // nothing starts or ends while x runs
  });

  it("names the stages of a cycle", () => {
    const nodes = [{ name: "a", after: ["c"] }, { name: "b", after: ["a"] }, { name: "c", after: ["b"] }, { name: "d", after: [] }];
    expect(() => validateDag(nodes)).toThrow(PipelineDefinitionError);
    expect(() => validateDag(nodes)).toThrow(/cycle between stages: (a -> c -> b -> a|c -> b -> a -> c|b -> a -> c -> b)/);
  });

  it("names an unknown dependency and a duplicate stage", () => {
    expect(() => validateDag([{ name: "a", after: ["nope"] }])).toThrow(/stage "a" depends on "nope"/);
    expect(() => validateDag([{ name: "a", after: [] }, { name: "a", after: [] }])).toThrow(/duplicate stage name "a"/);
  });

  it("fails fast: aborts running stages, skips the rest, rejects with the failed stage", async () => {
    const log: string[] = [];
    let abortedSeen = false;
    const nodes: DagNode<string>[] = [
      { name: "bad", after: [], run: async () => { await sleep(5); throw new Error("boom"); } },
      {
        name: "slow",
        after: [],
        run: async (signal) => {
          try {
            await sleep(5000, signal);
          } catch (e) {
            abortedSeen = signal.aborted;
            throw e;
          }
          return "slow";
        },
      },
      node("later", ["bad"], 1, log),
      node("other", ["slow"], 1, log),
    ];
    const t0 = Date.now();
    const err = await runDag(nodes, { concurrency: 2 }).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(err).toBeInstanceOf(StageError);
    expect((err as StageError).stage).toBe("bad");
    expect((err as StageError).message).toMatch(/stage "bad" failed: boom/);
    expect(((err as StageError).cause as Error).message).toBe("boom");
    expect(abortedSeen).toBe(true);
    expect(log).toEqual([]);
  });

  it("rejects a bad concurrency naming the option", async () => {
    await expect(runDag([], { concurrency: 0 })).rejects.toThrow(/concurrency: expected an integer >= 1, received 0/);
  });

  it("stops when the outer signal aborts", async () => {
    const ac = new AbortController();
    const log: string[] = [];
    const p = runDag([node("a", [], 5000, log), node("b", ["a"], 1, log)], { concurrency: 2, signal: ac.signal });
    setTimeout(() => ac.abort(new Error("SIGINT")), 20);
    await expect(p).rejects.toBeInstanceOf(StageError);
    expect(log).toEqual(["start:a"]);
  });
});
