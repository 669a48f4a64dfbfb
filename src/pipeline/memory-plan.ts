/**
 * What a run predicts about memory (src/estimate/): each stage's peak before it starts, for
 * the scheduler's memory budget (benchmarks from the ONNX calibration, train stages and
 * python-torch from the PyTorch one, a distributed train stage as launcher + ranks × rank),
 * and the estimate-vs-measured section of the report. Neither ever fails a run by itself: no
 * calibration means no prediction, said so. The PyTorch probe's terms are asked once per run
 * (the budget and the report share them): each is a short-lived worker importing torch.
 */
import { readFileSync } from "node:fs";
import { loadCalibration } from "../estimate/cache.ts";
import { features, type InputFeed, loadProbesFor, modelTerms, requestsPerBatch, type RunShape } from "../estimate/model-terms.ts";
import { predictedPeak } from "../estimate/predict.ts";
import { type DeviceEstimateCheck, deviceEstimateCheck, ranOnCuda } from "../estimate/report-device.ts";
import { type DistributedEstimateCheck, type EstimateReport, estimatesForReport } from "../estimate/report-estimates.ts";
import { type TorchRunFacts, torchEstimatesForReport } from "../estimate/report-torch.ts";
import { exportFeedOf, trainShapeOf, zooArchOf } from "../estimate/stage-facts.ts";
import { distributedEstimate } from "../estimate/torch-distributed.ts";
import { describeTrain, inferEstimate, TRAIN_BATCH_DEFAULT, trainEstimate } from "../estimate/torch-estimate.ts";
import { loadTorchCalibration } from "../estimate/torch-calibration.ts";
import { inferTerms, inferTermsKey, rankTerms, type TermsSource, type TorchTerms, trainTerms } from "../estimate/torch-terms.ts";
import type { Report } from "../report/schema.ts";
import type { PeakPrediction } from "./scheduler.ts";
import type { RunSession } from "./session.ts";
import type { BenchmarkResult, StageDef } from "./stages.ts";

/** MemAvailable from /proc/meminfo: what can be allocated without swapping, now. */
export function availableMiB(): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
  return m ? Number(m[1]) / 1024 : Number.POSITIVE_INFINITY;
}

/** The probe's terms of this run, each asked once (a failed probe is asked again). */
const termsOfRun = new WeakMap<RunSession, Map<string, Promise<TorchTerms>>>();
function runTerms(s: RunSession): TermsSource {
  if (!termsOfRun.has(s)) termsOfRun.set(s, new Map());
  const memo = termsOfRun.get(s)!;
  const once = (key: string, make: () => Promise<TorchTerms>): Promise<TorchTerms> => {
    if (!memo.has(key)) memo.set(key, make().catch((err: unknown) => { memo.delete(key); throw err; }));
    return memo.get(key)!;
  };
  return {
    train: (arch, shape, threads) => once(`train ${arch} ${JSON.stringify(shape)} ${threads}`, () => trainTerms(arch, shape, threads)),
    infer: (arch, run, threads) => once(inferTermsKey(arch, run, threads), () => inferTerms(arch, run, threads)),
    rank: (arch, shape, threads, strategy) => once(`rank ${strategy} ${arch} ${JSON.stringify(shape)} ${threads}`, () => rankTerms(arch, shape, threads, strategy)),
  };
}

/** The zoo arch a python-torch benchmark runs: its train stage's, or its zoo export's. */
/** Requests a benchmark stage runs at each batch size before its eval pass: warmup + timed. */
function callsOf(def: Extract<StageDef, { kind: "benchmark" }>, s: RunSession): number {
  return requestsPerBatch({ iterations: def.opts.iterations ?? s.options.iterations, warmup: def.opts.warmup ?? s.options.warmup });
}

function torchArchOf(s: RunSession, def: Extract<StageDef, { kind: "benchmark" }>, stages: readonly StageDef[]): string | null {
  const before = stages.slice(0, Math.max(0, stages.indexOf(def)));
  const from = def.opts.from ? stages.find((d) => d.name === def.opts.from) : [...before].reverse().find((d) => d.kind === "train");
  return zooArchOf(from);
}

/**
 * A stage's predicted peak once its inputs exist; null when nothing predicts it (no
 * calibration, an export or python stage, a benchmark whose model is not there).
 */
export async function predictStagePeak(s: RunSession, def: StageDef, stages: readonly StageDef[] = []): Promise<PeakPrediction | null> {
  if (def.kind === "train") return predictTrainPeak(s, def);
  if (def.kind !== "benchmark") return null;
  const maxBatch = Math.max(...(def.opts.batchSizes ?? s.options.batchSizes));
  if (def.runtime === "python-torch") {
    const cal = loadTorchCalibration();
    const arch = torchArchOf(s, def, stages);
    if (!cal || !arch || !s.heldout) return null;
    const batchSizes = def.opts.batchSizes ?? s.options.batchSizes;
    const run = { batchSizes, iterations: def.opts.iterations ?? s.options.iterations, warmup: def.opts.warmup ?? s.options.warmup, evalSamples: s.heldout.shape[0]! };
    const t = await runTerms(s).infer(arch, run, def.opts.threads ?? s.options.threads);
    const phases = inferEstimate(cal, t, { maxBatch, evalSamples: s.heldout.shape[0]! });
    const worst = phases.reduce((a, b) => (b.peak > a.peak ? b : a));
    return { peakMiB: worst.peak, parts: `python-torch ${arch}: calibrated fixed cost + weights + eval set + activations, highest at ${worst.phase}` };
  }
  const onnx = (s.results.get(def.opts.from ?? "") as { onnx?: string } | undefined)?.onnx;
  const cal = onnx && s.heldout ? loadCalibration() : null;
  if (!cal || !onnx || !s.heldout) return null;
  const run = { maxBatch, batchSizes: def.opts.batchSizes ?? s.options.batchSizes, evalSamples: s.heldout.shape[0]!, calls: callsOf(def, s) };
  const feed = exportFeedOf(stages.find((x) => x.name === def.opts.from));
  return predictedPeak(cal, def.runtime, features(def.runtime, await modelTerms(onnx, feed, { ...loadProbesFor([def.runtime]), tmpDir: s.tmpDir }), run));
}

/** A train stage's peak from the PyTorch calibration and the probe; a distributed one: launcher + local ranks. */
async function predictTrainPeak(s: RunSession, def: Extract<StageDef, { kind: "train" }>): Promise<PeakPrediction | null> {
  const cal = loadTorchCalibration();
  if (!cal) return null;
  const { arch } = def.opts;
  const threads = def.opts.threads ?? s.options.threads;
  const d = def.opts.distributed;
  const shape = trainShapeOf(def.opts);
  if (d) {
    const e = distributedEstimate(cal, await runTerms(s).rank(arch, shape, threads, d.strategy), shape, d);
    return { peakMiB: e.peakMiB, parts: `${d.strategy} ${arch}: ${e.parts}` };
  }
  const e = trainEstimate(cal, await runTerms(s).train(arch, shape, threads), shape);
  return { peakMiB: e.peakMiB, parts: `train ${arch}: ${describeTrain(e)}` };
}

/** Estimate vs measured for the ONNX runtimes; a failure of the estimate never fails the run. */
export async function reportEstimates(report: Report, stages: readonly StageDef[], s: RunSession): Promise<EstimateReport> {
  const runs = new Map<string, { onnx: string; run: RunShape; feed: InputFeed }>();
  for (const d of stages) {
    if (d.kind !== "benchmark") continue;
    const onnx = (s.results.get(d.opts.from ?? "") as { onnx?: string } | undefined)?.onnx;
    if (!onnx || !s.heldout) continue;
    const feed = exportFeedOf(stages.find((x) => x.name === d.opts.from));
    const batchSizes = d.opts.batchSizes ?? s.options.batchSizes;
    runs.set(d.runtime, { onnx, feed, run: { maxBatch: Math.max(...batchSizes), batchSizes, evalSamples: s.heldout.shape[0]!, calls: callsOf(d, s), threads: d.opts.threads ?? s.options.threads } });
  }
  let out: EstimateReport;
  try {
    out = await estimatesForReport(report, runs, s.tmpDir);
  } catch (err) {
    out = { status: "unavailable", reason: `the estimate failed: ${(err as Error).message.split("\n")[0]}`, calibratedAt: null, naiveMiB: null, runtimes: [] };
  }
  try {
    const torch = await torchEstimatesForReport(report, torchFacts(stages, s), runTerms(s));
    if (torch.pythonTorch) out.runtimes.unshift(torch.pythonTorch);
    out.training = torch.training;
    out.trainingReason = torch.trainingReason;
    if (out.status === "unavailable" && (torch.pythonTorch || torch.training)) out.status = "ok"; // `reason` still says why the ONNX rows are missing
  } catch (err) {
    out.training = null;
    out.trainingReason = `the PyTorch estimate failed: ${(err as Error).message.split("\n")[0]}`;
  }
  const device = deviceChecks(report, stages, s);
  if (device.length > 0) {
    out.device = device;
    if (out.status === "unavailable") out.status = "ok";
  }
  // Its own step: a distributed stage whose rank probe fails loses only its own row.
  const distributed = await distributedChecks(report, stages, s);
  if (distributed.length > 0) {
    out.distributed = distributed;
    if (out.status === "unavailable") out.status = "ok";
  }
  return out;
}

/** Each memlane-rt benchmark that ran on CUDA: its device memory estimated beside measured. */
function deviceChecks(report: Report, stages: readonly StageDef[], s: RunSession): DeviceEstimateCheck[] {
  const out: DeviceEstimateCheck[] = [];
  for (const d of stages) {
    if (d.kind !== "benchmark" || d.runtime !== "native") continue;
    const result = s.results.get(d.name) as BenchmarkResult | undefined;
    const row = report.runtimes.find((r) => r.name === d.runtime);
    if (!result?.plan || !row || !ranOnCuda(row)) continue;
    out.push(deviceEstimateCheck(d.name, row, result.plan.path, Math.max(...(d.opts.batchSizes ?? s.options.batchSizes))));
  }
  return out;
}

/** Each distributed train stage that ran: its predicted rank beside its ranks' highest peak. */
async function distributedChecks(report: Report, stages: readonly StageDef[], s: RunSession): Promise<DistributedEstimateCheck[]> {
  const cal = loadTorchCalibration();
  if (!cal) return [];
  const out: DistributedEstimateCheck[] = [];
  for (const d of stages) {
    const measured = report.distributed?.find((x) => x.stage === d.name);
    if (d.kind !== "train" || !d.opts.distributed || !measured || measured.ranks.length === 0) continue;
    const { arch } = d.opts;
    const dist = d.opts.distributed;
    // A rank that reported no phase (it died first) has no peak to compare with.
    const peaks = measured.ranks.flatMap((r) => r.phases.map((p) => p.peakRssMiB)).filter(Number.isFinite);
    if (peaks.length === 0) continue;
    const worst = Math.max(...peaks);
    const shape = trainShapeOf(d.opts);
    let e: ReturnType<typeof distributedEstimate>;
    try {
      e = distributedEstimate(cal, await runTerms(s).rank(arch, shape, d.opts.threads ?? s.options.threads, dist.strategy), shape, dist);
    } catch (err) {
      (report.notes ??= []).push(`estimate of distributed stage ${d.name}: its rank probe failed (${(err as Error).message.split("\n")[0]})`);
      continue;
    }
    out.push({
      stage: d.name, arch, strategy: dist.strategy, ranks: e.ranks, perRankEstimateMiB: e.perRankMiB, perRankMeasuredMiB: worst,
      errorPct: worst > 0 ? ((e.perRankMiB - worst) / worst) * 100 : 0, launcherEstimateMiB: e.launcherMiB, parts: e.parts,
    });
  }
  return out;
}

/** The run's first single-process train stage and python-torch benchmark, as the PyTorch estimate needs them. */
function torchFacts(stages: readonly StageDef[], s: RunSession): TorchRunFacts {
  // report.training is a single-process train stage's; distributed ranks are not estimated.
  const train = stages.find((d) => d.kind === "train" && !d.opts.distributed);
  const bench = stages.find((d) => d.kind === "benchmark" && d.runtime === "python-torch");
  let infer: TorchRunFacts["infer"] = null;
  if (bench?.kind === "benchmark" && s.heldout) {
    const from = bench.opts.from ? stages.find((d) => d.name === bench.opts.from) : train;
    const arch = zooArchOf(from);
    const batchSizes = [...(bench.opts.batchSizes ?? s.options.batchSizes)];
    if (arch) infer = {
      arch, batchSizes, maxBatch: Math.max(...batchSizes), evalSamples: s.heldout.shape[0]!, threads: bench.opts.threads ?? s.options.threads,
      iterations: bench.opts.iterations ?? s.options.iterations, warmup: bench.opts.warmup ?? s.options.warmup,
    };
  }
  return {
    train: train?.kind === "train"
      ? { stage: train.name, arch: train.opts.arch, batchSize: train.opts.batchSize ?? TRAIN_BATCH_DEFAULT, threads: train.opts.threads ?? s.options.threads }
      : null,
    infer,
  };
}
