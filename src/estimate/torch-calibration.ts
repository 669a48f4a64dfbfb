/**
 * The fixed costs of PyTorch on this machine: a calibration pipeline (train `mlp` for one
 * epoch, export, benchmark python-torch) run by `memlane run` in a fresh process; what it
 * measured minus the model terms the probe computes for `mlp` is the fixed part (the
 * interpreter, torch's import, sklearn's for the digits loader, autograd's and the
 * executor's threads, allocator slack). The test models (digits-cnn, tiny-gpt) are never
 * part of it. Cached beside the ONNX calibration, keyed by the same machine facts plus
 * torch's version.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import type { Report } from "../report/schema.ts";
import { REPO_ROOT } from "../workers/specs.ts";
import { cacheDir, calibrationKey, venvDistVersion, writeJsonAtomic } from "./cache.ts";
import { evalSamplesOf, type InferFigures, inferEstimate, optimizerOf, TRAIN_BATCH_DEFAULT, type TorchFixed, trainEstimate } from "./torch-estimate.ts";
import { inferTerms, type TorchTerms, trainTerms } from "./torch-terms.ts";

export const TORCH_CALIBRATION_FORMAT = 6; // 6: the infer probe's end is the mean of four fresh processes' samples
const PROBE_ARCH = "mlp";
const PROBE_BATCHES = [1, 8];
/** The calibration pipeline's python-torch benchmark (PIPELINE below), which its probe replays. */
const PROBE_CALLS = { iterations: 5, warmup: 1 };

export interface TorchCalibration extends TorchFixed {
  format: typeof TORCH_CALIBRATION_FORMAT;
  key: Record<string, string>;
  createdAt: string;
  /** What the calibration run measured, for inspection. */
  measured: { trainPeakMiB: number; infer: Record<string, InferFigures>; terms: TorchTerms };
}

export function torchCalibrationKey(): Record<string, string> {
  return { ...calibrationKey(), torch: venvDistVersion("torch"), torchFormat: String(TORCH_CALIBRATION_FORMAT), probe: `${PROBE_ARCH}|${PROBE_BATCHES.join("x")}` };
}

const pathOf = (key: Record<string, string>) =>
  join(cacheDir(), `calibration-torch-${createHash("sha256").update(JSON.stringify(key)).digest("hex").slice(0, 16)}.json`);

export function loadTorchCalibration(key = torchCalibrationKey()): TorchCalibration | null {
  const path = pathOf(key);
  if (!existsSync(path)) return null;
  try {
    const c = JSON.parse(readFileSync(path, "utf8")) as TorchCalibration;
    return c.format === TORCH_CALIBRATION_FORMAT && JSON.stringify(c.key) === JSON.stringify(key) ? c : null;
  } catch {
    return null;
  }
}

export function saveTorchCalibration(c: TorchCalibration): string {
  const path = pathOf(c.key);
  mkdirSync(cacheDir(), { recursive: true });
  writeJsonAtomic(path, c);
  return path;
}

const PIPELINE = `import { pipeline } from "memlane";
export default pipeline("estimate-calibration-torch", { batchSizes: [${PROBE_BATCHES.join(", ")}], iterations: ${PROBE_CALLS.iterations}, warmup: ${PROBE_CALLS.warmup}, threads: 1 })
  .train({ arch: "${PROBE_ARCH}", epochs: 1, seed: 0 })
  .export()
  .benchmark("python-torch");
`;

/** `memlane run` on a pipeline module in its own process; its report. */
export async function runPipelineInFreshProcess(file: string, outDir: string): Promise<Report> {
  mkdirSync(outDir, { recursive: true });
  const child = await execa(process.execPath, ["--import", "tsx", join(REPO_ROOT, "src/cli/main.ts"), "run", file, "-o", outDir, "-q"], { cwd: REPO_ROOT, reject: false, all: true });
  // The newest run directory holding a report (run ids sort by time): the out dir may hold
  // others (bench:estimate's tiny-gpt pipeline once left two run directories with reports).
  const all = readdirSync(outDir);
  const runs = all.filter((d) => existsSync(join(outDir, d, "report.json"))).sort();
  if (child.exitCode !== 0 || runs.length === 0)
    throw new Error(`memlane run ${file} failed (exit ${child.exitCode}; ${outDir} holds ${JSON.stringify(all)}): ${String(child.all ?? "").split("\n").slice(-8).join("\n")}`);
  return JSON.parse(readFileSync(join(outDir, runs.at(-1)!, "report.json"), "utf8")) as Report;
}

/** The train stage's peak: the highest phase peak of the training process. */
export const trainPeakOf = (r: Report): number | null => (r.training ? Math.max(...r.training.phases.map((p) => p.peakRssMiB)) : null);

export async function calibrateTorch(key: Record<string, string>, log: (l: string) => void): Promise<TorchCalibration> {
  const dir = mkdtempSync(join(tmpdir(), "memlane-calibrate-torch-"));
  try {
    const started = Date.now();
    const file = join(dir, "calibration.ts");
    writeFileSync(file, PIPELINE);
    const report = await runPipelineInFreshProcess(file, join(dir, "runs"));
    const shape = { batchSize: TRAIN_BATCH_DEFAULT, evalSamples: evalSamplesOf(PROBE_ARCH), optimizer: optimizerOf(PROBE_ARCH) };
    const terms = await trainTerms(PROBE_ARCH, shape, 1);
    const inferT = await inferTerms(PROBE_ARCH, { batchSizes: PROBE_BATCHES, ...PROBE_CALLS, evalSamples: evalSamplesOf(PROBE_ARCH) }, 1);
    const trainPeak = trainPeakOf(report);
    const torchRow = report.runtimes.find((r) => r.name === "python-torch");
    if (trainPeak === null || !torchRow) throw new Error("the torch calibration run has no training or no python-torch figures");
    // What the model terms of the probe arch explain; the rest is fixed.
    const zero: TorchFixed = { trainFixedMiB: 0, inferFixedMiB: Object.fromEntries(torchRow.phases.map((p) => [p.name, { rss: 0, uss: 0, pss: 0, peak: 0 }])) };
    const train = trainEstimate(zero, terms, shape);
    // python-torch holds the held-out set the training wrote: evalSamplesOf(PROBE_ARCH) samples
    const held = inferEstimate(zero, inferT, { maxBatch: Math.max(...PROBE_BATCHES), evalSamples: evalSamplesOf(PROBE_ARCH) });
    const measuredInfer = Object.fromEntries(torchRow.phases.map((p) => [p.name, { rss: p.rssMiB, uss: p.ussMiB, pss: p.pssMiB, peak: p.peakRssMiB }]));
    log(`memlane estimate: calibrated torch (train ${PROBE_ARCH} 1 epoch, python-torch) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return {
      format: TORCH_CALIBRATION_FORMAT, key, createdAt: new Date().toISOString(),
      trainFixedMiB: trainPeak - train.peakMiB,
      inferFixedMiB: Object.fromEntries(held.map((h) => {
        const m = measuredInfer[h.phase]!;
        return [h.phase, { rss: m.rss - h.rss, uss: m.uss - h.uss, pss: m.pss - h.pss, peak: m.peak - h.peak }];
      })),
      measured: { trainPeakMiB: trainPeak, infer: measuredInfer, terms },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The cached torch calibration, made (and cached) when there is none. */
export async function torchCalibration(log: (l: string) => void, redo = false): Promise<TorchCalibration> {
  const key = torchCalibrationKey();
  const cached = redo ? null : loadTorchCalibration(key);
  if (cached) return cached;
  log("memlane estimate: calibrating PyTorch on this machine (a one-epoch training run and a python-torch benchmark); about a minute");
  const c = await calibrateTorch(key, log);
  saveTorchCalibration(c);
  return c;
}
