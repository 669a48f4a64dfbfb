/**
 * What a run predicts about memory (src/estimate/): each benchmark's peak before it starts,
 * for the scheduler's memory budget, and the estimate-vs-measured section of the report.
 * Neither ever fails a run by itself: no calibration means no prediction, said so.
 */
import { readFileSync } from "node:fs";
import { loadCalibration } from "../estimate/cache.ts";
import { features, modelTerms } from "../estimate/model-terms.ts";
import { predictedPeak } from "../estimate/predict.ts";
import { type EstimateReport, estimatesForReport } from "../estimate/report-estimates.ts";
import { type TorchRunFacts, torchEstimatesForReport } from "../estimate/report-torch.ts";
import { TRAIN_BATCH_DEFAULT } from "../estimate/torch-estimate.ts";
import type { Report } from "../report/schema.ts";
import type { PeakPrediction } from "./scheduler.ts";
import type { RunSession } from "./session.ts";
import type { StageDef } from "./stages.ts";

/** MemAvailable from /proc/meminfo: what can be allocated without swapping, now. */
export function availableMiB(): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
  return m ? Number(m[1]) / 1024 : Number.POSITIVE_INFINITY;
}

/** A benchmark's predicted peak from the calibration, once its model exists; null otherwise. */
export async function predictStagePeak(s: RunSession, def: StageDef): Promise<PeakPrediction | null> {
  if (def.kind !== "benchmark") return null;
  const onnx = (s.results.get(def.opts.from ?? "") as { onnx?: string } | undefined)?.onnx;
  const cal = onnx && s.heldout ? loadCalibration() : null;
  if (!cal || !onnx || !s.heldout) return null;
  const run = { maxBatch: Math.max(...(def.opts.batchSizes ?? s.options.batchSizes)), evalSamples: s.heldout.shape[0]! };
  return predictedPeak(cal, def.runtime, features(def.runtime, await modelTerms(onnx), run));
}

/** Estimate vs measured for the ONNX runtimes; a failure of the estimate never fails the run. */
export async function reportEstimates(report: Report, stages: readonly StageDef[], s: RunSession): Promise<EstimateReport> {
  const runs = new Map<string, { onnx: string; run: { maxBatch: number; evalSamples: number } }>();
  for (const d of stages) {
    if (d.kind !== "benchmark") continue;
    const onnx = (s.results.get(d.opts.from ?? "") as { onnx?: string } | undefined)?.onnx;
    if (!onnx || !s.heldout) continue;
    runs.set(d.runtime, { onnx, run: { maxBatch: Math.max(...(d.opts.batchSizes ?? s.options.batchSizes)), evalSamples: s.heldout.shape[0]! } });
  }
  let out: EstimateReport;
  try {
    out = await estimatesForReport(report, runs);
  } catch (err) {
    out = { status: "unavailable", reason: `the estimate failed: ${(err as Error).message.split("\n")[0]}`, calibratedAt: null, naiveMiB: null, runtimes: [] };
  }
  try {
    const torch = await torchEstimatesForReport(report, torchFacts(stages, s));
    if (torch.pythonTorch) out.runtimes.unshift(torch.pythonTorch);
    out.training = torch.training;
    out.trainingReason = torch.trainingReason;
    if (out.status === "unavailable" && (torch.pythonTorch || torch.training)) out.status = "ok"; // `reason` still says why the ONNX rows are missing
  } catch (err) {
    out.training = null;
    out.trainingReason = `the PyTorch estimate failed: ${(err as Error).message.split("\n")[0]}`;
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
    const arch = from?.kind === "train" ? from.opts.arch : from?.kind === "export" ? from.opts.zoo : undefined;
    const batchSizes = [...(bench.opts.batchSizes ?? s.options.batchSizes)];
    if (arch) infer = { arch, batchSizes, maxBatch: Math.max(...batchSizes), evalSamples: s.heldout.shape[0]!, threads: bench.opts.threads ?? s.options.threads };
  }
  return {
    train: train?.kind === "train"
      ? { stage: train.name, arch: train.opts.arch, batchSize: train.opts.batchSize ?? TRAIN_BATCH_DEFAULT, threads: train.opts.threads ?? s.options.threads }
      : null,
    infer,
  };
}
