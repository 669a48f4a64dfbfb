// `memlane run --memory-budget` with train stages, end to end on this machine in a temp cache
// dir: a real PyTorch calibration, then real runs whose train stages (single-process and
// distributed DDP) are predicted by the estimate probe before they start: one predicted
// above the budget fails before it starts with the prediction and its parts; two independent
// train stages whose predictions do not fit together run one after the other, and side by
// side when the budget holds both.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { evalSamplesOf, optimizerOf, TRAIN_BATCH_DEFAULT, trainEstimate } from "../../src/estimate/torch-estimate.ts";
import { torchCalibration } from "../../src/estimate/torch-calibration.ts";
import { trainTerms } from "../../src/estimate/torch-terms.ts";
import type { Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";
import { expectNoneLeft, startCli, tempDirWithCache } from "./pipeline-helpers.ts";

const { dir, cache } = tempDirWithCache("memlane-budget-train-");

const HEAD = `import { pipeline } from "memlane";\nexport default pipeline("budget-train", { threads: 1 })`;
const common = `epochs: 1, seed: 0, retries: 0`;

async function run(name: string, body: string, flags: string[]) {
  const file = path.join(dir, `${name}.ts`);
  writeFileSync(file, `${HEAD}\n${body};\n`);
  const out = path.join(dir, `runs-${name}`);
  const cli = startCli(["run", file, "-o", out, "-q", ...flags], { MEMLANE_CACHE_DIR: cache });
  const { code } = await cli.exit;
  expect(await expectNoneLeft(cli.tag)).toEqual([]);
  const runs = (() => { try { return readdirSync(out); } catch { return []; } })();
  const report = runs.length === 1 ? (JSON.parse(readFileSync(path.join(out, runs[0]!, "report.json"), "utf8")) as Report) : null;
  return { code, stderr: cli.stderr(), stdout: cli.stdout(), report };
}

async function predictedTrainPeak(arch: string): Promise<number> {
  const cal = await torchCalibration(() => {});
  const shape = { batchSize: TRAIN_BATCH_DEFAULT, evalSamples: evalSamplesOf(arch), optimizer: optimizerOf(arch) };
  return trainEstimate(cal, await trainTerms(arch, shape, 1), shape).peakMiB;
}

describe("memlane run --memory-budget with train stages (real PyTorch calibration and probes)", () => {
  it("fails a single-process or distributed train stage predicted above the budget before it starts, naming the prediction and its parts", async () => {
    const single = await predictedTrainPeak("digits-cnn");
    const body = `.train({ arch: "digits-cnn", ${common}, name: "single" })\n  .train({ arch: "digits-cnn", ${common}, name: "ddp", after: [], distributed: { nproc: 2, strategy: "ddp" } })`;
    const low = await run("low", body, ["-j", "2", "--memory-budget", "100MiB"]);
    expect(low.code, low.stderr).not.toBe(0);
    expect(low.stderr).toMatch(/stage "single" failed\n\s+error: predicted peak \d+\.\d MiB exceeds the memory budget of 100\.0 MiB \(train digits-cnn: fixed .* \+ parameters .* \+ gradients .* \+ optimizer .* \+ activations/);
    expect(low.report, "no stage ran, so no report").toBeNull();
    // Room for the single process but not for the launcher and two ranks: the DDP stage is refused.
    const mid = await run("mid", body, ["-j", "2", "--memory-budget", `${Math.ceil(single * 1.3)}MiB`]);
    expect(mid.code, mid.stderr).not.toBe(0);
    const m = /stage "ddp" failed\n\s+error: predicted peak (\d+\.\d) MiB exceeds the memory budget .*\(ddp digits-cnn: launcher \d+\.\d MiB \+ 2 ranks × (\d+\.\d) MiB \(local batch 16: fixed .* distributed imports \d+\.\d MiB \+ DDP gradient buckets/.exec(mid.stderr);
    expect(m, mid.stderr).not.toBeNull();
    // Each rank is a whole training process: about the single process at half the batch.
    expect(Number(m![2])).toBeGreaterThan(single * 0.8);
    expect(Number(m![1])).toBeGreaterThan(2 * single * 0.8);
    expect(mid.stderr).not.toMatch(/stage "single" failed/);
  }, 900_000);

  it("runs independent train stages one after the other when their predicted peaks do not fit together, side by side when they do", async () => {
    const [mlp, cnn] = [await predictedTrainPeak("mlp"), await predictedTrainPeak("digits-cnn")];
    const body = `.train({ arch: "mlp", ${common}, name: "a" })\n  .train({ arch: "digits-cnn", ${common}, name: "b", after: [] })`;
    const overlap = (r: Report) => {
      const [a, b] = ["a", "b"].map((n) => r.stages.find((s) => s.name === n)!);
      return Math.min(a!.endMs, b!.endMs) - Math.max(a!.startMs, b!.startMs);
    };
    // Room for either alone (with 30 % to spare for the probe's noise) but not both.
    const tight = await run("tight", body, ["-j", "2", "--memory-budget", `${Math.ceil(Math.max(mlp, cnn) * 1.3)}MiB`]);
    expect(tight.code, tight.stderr).toBe(0);
    expect(mlp + cnn).toBeGreaterThan(Math.max(mlp, cnn) * 1.3);
    expect(overlap(tight.report!), JSON.stringify(tight.report!.stages)).toBeLessThanOrEqual(0);
    // The report still carries the train stage's estimate beside what it measured.
    expect(tight.report!.estimates?.training?.estimateMiB).toBeGreaterThan(0);
    const roomy = await run("roomy", body, ["-j", "2", "--memory-budget", `${Math.ceil((mlp + cnn) * 1.3)}MiB`]);
    expect(roomy.code, roomy.stderr).toBe(0);
    expect(overlap(roomy.report!), JSON.stringify(roomy.report!.stages)).toBeGreaterThan(0);
  }, 900_000);

  it("a distributed train stage that ran carries its rank estimate beside the ranks' measured peak in the report", async () => {
    await torchCalibration(() => {});
    const body = `.train({ arch: "digits-cnn", ${common}, name: "ddp", distributed: { nproc: 2, strategy: "ddp" } })`;
    const r = await run("ddp-report", body, ["--memory-budget", "8GiB"]);
    expect(r.code, r.stderr).toBe(0);
    expect(validateReport(r.report!)).toEqual([]);
    const d = r.report!.estimates?.distributed?.[0];
    expect(d, JSON.stringify(r.report!.estimates)).toBeTruthy();
    const ranks = r.report!.distributed![0]!.ranks;
    expect(d!.perRankMeasuredMiB).toBe(Math.max(...ranks.map((k) => Math.max(...k.phases.map((p) => p.peakRssMiB)))));
    expect(Math.abs(d!.errorPct), `rank: ${d!.perRankEstimateMiB.toFixed(1)} estimated, ${d!.perRankMeasuredMiB.toFixed(1)} measured; ${d!.parts}`).toBeLessThan(10);
    expect(d!.ranks).toBe(2);
    const runs = path.join(dir, "runs-ddp-report");
    expect(readFileSync(path.join(runs, readdirSync(runs)[0]!, "report.md"), "utf8")).toMatch(/Distributed \(ddp, digits-cnn, ddp, 2 ranks here\): peak RSS a rank/);
  }, 900_000);
});
