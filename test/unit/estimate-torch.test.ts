// The PyTorch estimate's terms without workers: the batch extrapolation, the train peak's
// parts (optimizer states per optimizer, the moment with the most held, the measured run
// replacing the physics floor), python-torch's phases, and the concurrent peak under the
// scheduler's rules (exclusive alone, no stage beside its ancestors, -j, the budget).
import { describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeJsonAtomic } from "../../src/estimate/cache.ts";
import { concurrentPeak } from "../../src/estimate/concurrent-peak.ts";
import { inferEstimate, OPTIMIZER_STATES, type TorchFixed, trainEstimate } from "../../src/estimate/torch-estimate.ts";
import { distributedEstimate, localBatch } from "../../src/estimate/torch-distributed.ts";
import { heapTopNote } from "../../src/estimate/pipeline-estimate.ts";
import { atBatch, combineDraws, type TorchTerms } from "../../src/estimate/torch-terms.ts";

const MIB = 2 ** 20;
const terms = (over: Partial<TorchTerms> = {}): TorchTerms => ({
  arch: "t", params: 1_000_000, paramMiB: 4_000_000 / MIB, bufferMiB: 0, probeBatches: [2, 8],
  // forward: 1 MiB fixed + 1 MiB a sample; backward: 2 + 1.5 a sample; inference: 0.25 a sample
  probes: { trainForward: [3 * MIB, 9 * MIB], trainBackward: [5 * MIB, 14 * MIB], inference: [0.5 * MIB, 2 * MIB] },
  dataMiB: 10, runMiB: null, runFirstMiB: null, runEndMiB: null, runEndRangeMiB: null, runDraws: 0, distImportMiB: null, inputElements: 64, inputBytesPerElement: 4, ...over,
});
const fixed: TorchFixed = {
  trainFixedMiB: 300,
  inferFixedMiB: { import: { rss: 200, uss: 150, pss: 170, peak: 200 }, "model-load": { rss: 201, uss: 151, pss: 171, peak: 202 }, "steady-inference": { rss: 205, uss: 155, pss: 175, peak: 206 } },
};

describe("atBatch", () => {
  it("extrapolates the two probe batches along a line, in MiB", () => {
    expect(atBatch([3 * MIB, 9 * MIB], [2, 8], 32)).toBeCloseTo(33, 6);
    expect(atBatch([3 * MIB, 9 * MIB], [2, 8], 2)).toBeCloseTo(3, 6);
  });
  it("never takes a negative slope or figure (a probe that shrank is noise, not a model)", () => {
    expect(atBatch([9 * MIB, 3 * MIB], [2, 8], 100)).toBeCloseTo(9, 6);
  });
});

describe("distributedEstimate", () => {
  const P = 4_000_000 / MIB;
  const local = { batchSize: 16, evalSamples: 10, optimizer: "adam" as const };
  it("is the launcher plus nproc ranks, each a train process at its local batch with the rank's imports", () => {
    expect(localBatch(32, { nproc: 2, strategy: "ddp" })).toBe(16);
    expect(localBatch(32, { nproc: 2, strategy: "ddp", nnodes: 2 })).toBe(8);
    const one = trainEstimate(fixed, terms(), local).peakMiB;
    const ddp = distributedEstimate(fixed, terms({ distImportMiB: 70 }), local, { nproc: 2, strategy: "ddp" });
    // DDP: every rank a full replica plus the reducer's buckets (one more copy of the gradients)
    expect(ddp.perRankMiB).toBeCloseTo(one + 70 + P, 6);
    expect(ddp.launcherMiB).toBe(200); // the calibrated import phase: a process with torch imported
    expect(ddp.peakMiB).toBeCloseTo(200 + 2 * ddp.perRankMiB, 6);
    expect(ddp.parts).toMatch(/launcher 200\.0 MiB \+ 2 ranks × .* distributed imports 70\.0 MiB \+ DDP gradient buckets/);
  });
  it("takes FSDP's shards held by the other ranks off each rank, counting only this host's ranks", () => {
    const one = trainEstimate(fixed, terms(), local).peakMiB;
    const states = P + P + 2 * P; // parameters, gradients, Adam's two states
    const fsdp = distributedEstimate(fixed, terms({ distImportMiB: 70 }), local, { nproc: 2, strategy: "fsdp", nnodes: 2 });
    expect(fsdp.perRankMiB).toBeCloseTo(one + 70 - 0.75 * states, 6); // world 4: a rank keeps a quarter
    expect(fsdp.ranks).toBe(2);
    expect(fsdp.peakMiB).toBeCloseTo(200 + 2 * fsdp.perRankMiB, 6);
  });
});

describe("trainEstimate", () => {
  const P = 4_000_000 / MIB;
  it("adds parameters, gradients and two Adam states, and the moment with the most held", () => {
    const e = trainEstimate(fixed, terms(), { batchSize: 32, evalSamples: 10, optimizer: "adam" });
    // forward at 32: 33 MiB + G; backward: 50 MiB (gradients included); eval at 10: 2.5 + G
    expect(e.parts.activationsAt).toBe("backward");
    expect(e.parts.optimizerMiB).toBeCloseTo(2 * P, 9);
    expect(e.parts.activationsMiB).toBeCloseTo(50 - P, 6);
    expect(e.peakMiB).toBeCloseTo(300 + 10 + P + P + 2 * P + (50 - P), 6);
    expect(e.parts.allocatorMiB).toBeNull();
  });
  it("counts one state for SGD with momentum and none for plain SGD", () => {
    expect(OPTIMIZER_STATES).toMatchObject({ adam: 2, adamw: 2, "sgd-momentum": 1, sgd: 0 });
    const adam = trainEstimate(fixed, terms(), { batchSize: 32, evalSamples: 10, optimizer: "adam" }).peakMiB;
    const sgd = trainEstimate(fixed, terms(), { batchSize: 32, evalSamples: 10, optimizer: "sgd" }).peakMiB;
    expect(adam - sgd).toBeCloseTo(2 * P, 9);
  });
  it("takes the eval forward when a large held-out set holds more than a step", () => {
    const e = trainEstimate(fixed, terms(), { batchSize: 2, evalSamples: 1000, optimizer: "adam" });
    expect(e.parts.activationsAt).toBe("eval forward");
    expect(e.parts.activationsMiB).toBeCloseTo(0.25 * 1000, 6);
  });
  it("uses the measured short run where there is one, and names the allocator's share", () => {
    const e = trainEstimate(fixed, terms({ runMiB: 120 }), { batchSize: 32, evalSamples: 10, optimizer: "adam" });
    expect(e.peakMiB).toBeCloseTo(300 + 10 + 120, 6);
    expect(e.parts.allocatorMiB).toBeCloseTo(120 - (P + P + 2 * P + (50 - P)), 6);
  });
  it("gives seeds/003's naive figure: parameters x 4 B + a batch of inputs x 4 B", () => {
    expect(trainEstimate(fixed, terms(), { batchSize: 32, evalSamples: 10, optimizer: "adam" }).naiveMiB).toBeCloseTo((4e6 + 64 * 4 * 32) / MIB, 9);
  });
});

describe("inferEstimate", () => {
  it("holds nothing of the model at import, weights and eval set from model-load (twice the weights at its peak), the run after", () => {
    const t = terms({ runMiB: 20 });
    const rows = Object.fromEntries(inferEstimate(fixed, t, { maxBatch: 64, evalSamples: 100 }).map((r) => [r.phase, r]));
    const evalSet = (64 * 4 * 100) / MIB;
    expect(rows["import"]!.rss).toBe(200);
    expect(rows["model-load"]!.rss).toBeCloseTo(201 + t.paramMiB + evalSet, 9);
    expect(rows["model-load"]!.peak).toBeCloseTo(202 + 2 * t.paramMiB + evalSet, 9);
    expect(rows["steady-inference"]!.uss).toBeCloseTo(155 + 20 + evalSet, 9);
  });
  it("ends steady-inference where the replayed run ended, and peaks where it peaked", () => {
    const t = terms({ runMiB: 30, runEndMiB: 22, runFirstMiB: 5 });
    const rows = Object.fromEntries(inferEstimate(fixed, t, { maxBatch: 64, evalSamples: 100 }).map((r) => [r.phase, r]));
    const evalSet = (64 * 4 * 100) / MIB;
    expect(rows["steady-inference"]!.rss).toBeCloseTo(205 + 22 + evalSet, 9);
    expect(rows["steady-inference"]!.peak).toBeCloseTo(206 + 30 + evalSet, 9);
    expect(rows["import"]!.peak).toBe(200);
  });
});

describe("combineDraws (the short run in several fresh processes)", () => {
  it("ends at the mean of every draw's samples, peaks and starts at the median draw, and keeps the samples' range", () => {
    const c = combineDraws([
      { runMiB: 80, runFirstMiB: 17, runEndMiB: 34, runEndSamplesMiB: [34, 36] },
      { runMiB: 93, runFirstMiB: 18, runEndMiB: 93, runEndSamplesMiB: [90, 93] },
      { runMiB: 82, runFirstMiB: 17.5, runEndMiB: 50, runEndSamplesMiB: [51, 50] },
    ]);
    // not the first draw's end (34), nor the last's (50): (34+36+90+93+51+50)/6
    expect(c.runEndMiB).toBeCloseTo(59, 9);
    expect(c.runEndRangeMiB).toEqual([34, 93]);
    expect(c.runMiB).toBe(82);
    expect(c.runFirstMiB).toBe(17.5);
    expect(c.runDraws).toBe(3);
  });

  it("takes the median draw's end for a train run (no samples) and nothing from no run", () => {
    const train = combineDraws([
      { runMiB: 525, runFirstMiB: null, runEndMiB: 277 }, { runMiB: 499, runFirstMiB: null, runEndMiB: 339 },
      { runMiB: 550, runFirstMiB: null, runEndMiB: 322 }, { runMiB: 490, runFirstMiB: null, runEndMiB: 250 },
    ]);
    // medianOrNull's middle: the upper one of an even count
    expect(train).toEqual({ runMiB: 525, runFirstMiB: null, runEndMiB: 322, runEndRangeMiB: null, runDraws: 4 });
    expect(combineDraws([{ runMiB: null, runFirstMiB: null, runEndMiB: null }])).toEqual({ runMiB: null, runFirstMiB: null, runEndMiB: null, runEndRangeMiB: null, runDraws: 0 });
  });

  it("says where the draws' ends spread wider than noise, and nothing where they agree", () => {
    expect(heapTopNote({ runEndMiB: 59, runEndRangeMiB: [34, 93], runDraws: 4 }, 64)).toMatch(/batch 64 the probe's 4 fresh processes held 34\.0 to 93\.0 MiB above their start .* the estimate their mean 59\.0 MiB$/);
    expect(heapTopNote({ runEndMiB: 9.1, runEndRangeMiB: [9.0, 9.2], runDraws: 4 }, 64)).toBe("");
    expect(heapTopNote({ runEndMiB: null, runEndRangeMiB: null, runDraws: 0 }, 64)).toBe("");
  });
});

describe("concurrentPeak", () => {
  const st = (stage: string, peakMiB: number | null, after: string[] = [], exclusive = false) => ({ stage, peakMiB, after, exclusive });
  it("adds independent shared stages up to -j, never a stage beside its ancestor", () => {
    const stages = [st("train", 400), st("export", null, ["train"]), st("a", 100, ["export"]), st("b", 150, ["export"]), st("c", 120, ["export"])];
    expect(concurrentPeak(stages, 2, 1e9)).toMatchObject({ peakMiB: 400, stages: ["train"] });
    expect(concurrentPeak(stages, 3, 1e9).peakMiB).toBe(400);
    const wide = [st("a", 100), st("b", 150), st("c", 120)];
    expect(concurrentPeak(wide, 2, 1e9)).toMatchObject({ peakMiB: 270, stages: ["b", "c"] });
    expect(concurrentPeak(wide, 3, 1e9).peakMiB).toBe(370);
  });
  it("runs exclusive stages alone and holds back a set over the budget", () => {
    const stages = [st("a", 100, [], true), st("b", 150), st("c", 120)];
    expect(concurrentPeak(stages, 3, 1e9)).toMatchObject({ peakMiB: 270, stages: ["b", "c"] });
    expect(concurrentPeak(stages, 3, 200)).toMatchObject({ peakMiB: 150, stages: ["b"] });
  });
  it("names the unestimated stages that may run beside the worst set", () => {
    const stages = [st("a", 100), st("py", null), st("b", 50, ["a"])];
    expect(concurrentPeak(stages, 2, 1e9)).toMatchObject({ peakMiB: 100, stages: ["a"], unestimatedBeside: ["py"] });
  });
});

describe("concurrentPeak on a wide pipeline", () => {
  const st = (stage: string, peakMiB: number | null, after: string[] = []) => ({ stage, peakMiB, after, exclusive: false });
  it("finds the exact worst set of 40 independent stages at -j 8 quickly (pruned, not C(40,8) sets)", () => {
    const stages = Array.from({ length: 40 }, (_, i) => st(`s${i}`, 10 + ((i * 37) % 40)));
    const t0 = performance.now();
    const c = concurrentPeak(stages, 8, 1e9);
    expect(performance.now() - t0).toBeLessThan(2000);
    const top8 = stages.map((s) => s.peakMiB!).sort((a, b) => b - a).slice(0, 8).reduce((a, b) => a + b, 0);
    expect(c).toMatchObject({ peakMiB: top8, upperBound: false });
    expect(c.stages).toHaveLength(8);
  });
  it("gives a labelled safe upper bound when the search is too wide to finish", () => {
    // Equal peaks under a budget that admits only 5 of them: no pruning helps, the search gives up.
    const stages = Array.from({ length: 40 }, (_, i) => st(`s${i}`, 100));
    const t0 = performance.now();
    const c = concurrentPeak(stages, 8, 550);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(c.upperBound).toBe(true);
    expect(c.peakMiB).toBeGreaterThanOrEqual(500); // the true worst set: 5 stages
    expect(c.peakMiB).toBeLessThanOrEqual(550); // never more than the budget lets run together
  });
});

describe("writeJsonAtomic", () => {
  it("writes through a rename and leaves no temp file behind when the write fails", () => {
    const dir = mkdtempSync(join(tmpdir(), "memlane-atomic-"));
    try {
      const path = join(dir, "c.json");
      writeJsonAtomic(path, { a: 1 });
      expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ a: 1 });
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      expect(() => writeJsonAtomic(path, cyclic)).toThrow(/circular/i);
      // A rename onto a directory fails after the temp file is written.
      mkdirSync(join(dir, "d.json"));
      expect(() => writeJsonAtomic(join(dir, "d.json"), { b: 2 })).toThrow();
      expect(readdirSync(dir).sort()).toEqual(["c.json", "d.json"]);
      expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ a: 1 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
