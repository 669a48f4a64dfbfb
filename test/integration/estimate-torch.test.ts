// The PyTorch estimate end to end on this machine, in a temp cache dir: a real torch
// calibration (train mlp one epoch + a python-torch benchmark, by `memlane run` in its own
// process), then a tiny digits run (train digits-cnn, one epoch) whose report carries the
// train stage's estimate beside its measured peak, within the 10 % target; and
// `memlane estimate pipelines/digits.ts` printing every stage of the demo pipeline without
// running any (ONNX calibration from two probes, as estimate.test.ts does, to keep it short).
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import digits from "../../pipelines/digits.ts";
import { calibrationKey, saveCalibration } from "../../src/estimate/cache.ts";
import { calibrate } from "../../src/estimate/calibration.ts";
import { PROBES } from "../../src/estimate/probe-models.ts";
import { loadTorchCalibration, torchCalibration } from "../../src/estimate/torch-calibration.ts";
import { inferTerms, RUN_DRAWS } from "../../src/estimate/torch-terms.ts";
import type { Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";
import { expectNoneLeft, startCli, tempDirWithCache } from "./pipeline-helpers.ts";

const { dir, cache } = tempDirWithCache("memlane-estimate-torch-");

describe("the python-torch probe's short run, drawn in fresh processes", () => {
  it("is measured in RUN_DRAWS workers, its end the samples' mean within their range", async () => {
    const t = await inferTerms("mlp", { batchSizes: [1, 8], iterations: 2, warmup: 1, evalSamples: 16 }, 1);
    expect(t.runDraws).toBe(RUN_DRAWS);
    const [lo, hi] = t.runEndRangeMiB!;
    expect(lo).toBeLessThanOrEqual(t.runEndMiB!);
    expect(t.runEndMiB!).toBeLessThanOrEqual(hi);
    expect(t.runMiB!).toBeGreaterThan(0);
  }, 120_000);
});

describe("PyTorch estimates (calibrated on this machine)", () => {
  it("predicts a tiny digits run's training peak within 10 % of the measured one, the naive formula beside it", async () => {
    const lines: string[] = [];
    const cal = await torchCalibration((l) => lines.push(l));
    expect(lines.join("\n")).toMatch(/calibrated torch/);
    expect(loadTorchCalibration()).toEqual(cal);
    // The fixed cost is at least the interpreter with torch imported, and not the whole run.
    expect(cal.trainFixedMiB).toBeGreaterThan(100);
    expect(cal.trainFixedMiB).toBeLessThan(cal.measured.trainPeakMiB);

    const file = path.join(dir, "tiny-digits.ts");
    writeFileSync(file, `import { pipeline } from "memlane";\nexport default pipeline("tiny-digits", { threads: 1 }).train({ arch: "digits-cnn", epochs: 1, seed: 0 });\n`);
    const runs = path.join(dir, "runs");
    const run = startCli(["run", file, "-o", runs, "-q"], { MEMLANE_CACHE_DIR: cache });
    expect((await run.exit).code, run.stderr()).toBe(0);
    expect(await expectNoneLeft(run.tag)).toEqual([]);
    const r = JSON.parse(readFileSync(path.join(runs, readdirSync(runs)[0]!, "report.json"), "utf8")) as Report;
    expect(validateReport(r)).toEqual([]);
    const t = r.estimates!.training!;
    expect(t, JSON.stringify(r.estimates)).toBeTruthy();
    const measured = Math.max(...r.training!.phases.map((p) => p.peakRssMiB));
    expect(t.measuredMiB).toBe(measured);
    expect(Math.abs(t.errorPct), `training peak: ${t.estimateMiB.toFixed(1)} estimated, ${measured.toFixed(1)} measured; ${t.parts}`).toBeLessThan(10);
    // seeds/003 sees 38k parameters: a fraction of a MiB against a process of hundreds.
    expect(t.naiveErrorPct).toBeLessThan(-90);
    expect(t.parts).toMatch(/fixed .* data .* parameters .* gradients .* optimizer .* activations/);
    expect(readFileSync(path.join(runs, readdirSync(runs)[0]!, "report.md"), "utf8")).toMatch(/Training \(train, digits-cnn\): peak RSS/);
  }, 600_000);

  it("memlane estimate pipelines/digits.ts prints every stage, the concurrent peak and no device figure", async () => {
    const probes = PROBES.filter((p) => p.name === "tiny" || p.name === "weights");
    saveCalibration(await calibrate(calibrationKey(), { err: () => {} }, probes));
    const est = startCli(["estimate", "pipelines/digits.ts", "--device", "cuda"], { MEMLANE_CACHE_DIR: cache });
    expect((await est.exit).code, est.stderr()).toBe(0);
    const out = est.stdout();
    for (const s of digits.stages) expect(out, `stage ${s.name}`).toContain(s.name);
    expect(out).toMatch(/predicted concurrent peak .*: \d+(\.\d+)? MiB/);
    expect(out).toMatch(/not estimated/); // export, checkpoint loads, the python stage
    expect(out).toMatch(/device: not estimated for a pipeline.s stages \(memlane-rt.s device memory: memlane estimate <model.onnx> --device cuda/);
    expect(est.stderr()).not.toMatch(/calibrating/);
    expect(await expectNoneLeft(est.tag)).toEqual([]);
  }, 600_000);
});
