import { describe, expect, it } from "vitest";
import { pipeline, PIPELINE_DEFAULTS } from "../../src/pipeline/index.ts";
import { resolveRunOptions } from "../../src/pipeline/run.ts";

describe("pipeline builder", () => {
  it("fills in default names and dependencies", () => {
    const p = pipeline("digits")
      .train({ arch: "digits-cnn" })
      .export()
      .benchmark("python-torch")
      .benchmark("python-ort")
      .checkpointLoad()
      .python("confusion", async () => null);
    const byName = Object.fromEntries(p.stages.map((s) => [s.name, s]));
    expect(byName.export!.after).toEqual(["train"]);
    expect(byName["bench:python-torch"]!.after).toEqual(["train"]);
    expect(byName["bench:python-ort"]!.after).toEqual(["export"]);
    expect(byName["bench:python-ort"]!.exclusive).toBe(true);
    expect(byName["checkpoint-load"]!.after).toEqual(["train"]);
    expect(byName.confusion!.after).toEqual(["train", "export", "bench:python-torch", "bench:python-ort", "checkpoint-load"]);
    expect(p.options).toEqual(PIPELINE_DEFAULTS);
    expect(Object.isFrozen(p.options)).toBe(true);
  });

  it("names the option, the expected and the received value", () => {
    expect(() => pipeline("x", { concurrency: 0 })).toThrow("concurrency: expected an integer >= 1, received 0");
    expect(() => pipeline("x", { batchSizes: [1, -2] })).toThrow("batchSizes: expected a non-empty list of integers >= 1, received [1, -2]");
    expect(() => pipeline("x", { maxMessageBytes: 512 })).toThrow('maxMessageBytes: expected "auto" or an integer number of bytes >= 1024, received 512');
    expect(() => pipeline("x", { maxMessageBytes: "huge" as never })).toThrow(/maxMessageBytes: expected "auto"/);
    expect(pipeline("x", { maxMessageBytes: 2 ** 20 }).options.maxMessageBytes).toBe(2 ** 20);
    expect(pipeline("x").options.maxMessageBytes).toBe("auto");
    expect(() => pipeline("x", { bogus: 1 } as never)).toThrow(/pipeline options.bogus/);
    expect(() => pipeline("x").benchmark("tensorflow" as never)).toThrow(
      'benchmark runtime: expected one of "python-torch", "python-ort", "node-ort", "native", received "tensorflow"',
    );
    expect(() => pipeline("x").export()).toThrow(/stage "export": from: expected a train stage declared before it/);
    expect(() => pipeline("x").train({ arch: "a" }).train({ arch: "a" })).toThrow(/stage "train"/);
    expect(() => pipeline("x").train({ arch: "tiny-gpt", stepsPerEpoch: 0 })).toThrow('stage "train": stepsPerEpoch: expected an integer >= 1, received 0');
  });

  it("device: auto by default (CUDA where a GPU is found), overridden per run, a bad one named", () => {
    expect(PIPELINE_DEFAULTS.device).toBe("auto");
    const p = pipeline("x", { device: "cpu" }).train({ arch: "digits-cnn" });
    expect(resolveRunOptions(p, {}).device).toBe("cpu");
    expect(resolveRunOptions(p, { device: "cuda" }).device).toBe("cuda");
    expect(() => resolveRunOptions(p, { device: "gpu" as never })).toThrow('device: expected one of "cpu", "cuda", "auto", received "gpu"');
    expect(() => pipeline("x", { device: "tpu" as never })).toThrow(/device: expected one of/);
  });

  it("checkpointLoad on a zoo checkpoint needs no train stage, and takes zoo or from, not both", () => {
    const p = pipeline("x").checkpointLoad({ zoo: "resnet18", seed: 2 });
    expect(p.stages[0]!.after).toEqual([]);
    expect(p.stages[0]!.kind === "checkpoint-load" && p.stages[0]!.opts).toMatchObject({ zoo: "resnet18", seed: 2 });
    expect(() => pipeline("x").train({ arch: "a" }).checkpointLoad({ zoo: "resnet18", from: "train" })).toThrow(
      'stage "checkpoint-load": from: expected either zoo or from, not both',
    );
    expect(() => pipeline("x").checkpointLoad({ zoo: "resnet18", seed: -1 })).toThrow(/stage "checkpoint-load": seed: expected an integer >= 0/);
    expect(() => pipeline("x").train({ arch: "a" }).checkpointLoad({ seed: 1 })).toThrow(/stage "checkpoint-load": seed: expected no seed without zoo/);
  });

  it("reports a cycle when the stages are read", () => {
    const p = pipeline("x")
      .python("a", async () => 1, { after: ["b"] })
      .python("b", async () => 1, { after: ["a"] });
    expect(() => p.stages).toThrow(/cycle between stages: .*a.*b/);
  });
});
