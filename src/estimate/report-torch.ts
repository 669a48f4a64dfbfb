/**
 * The PyTorch rows of a report's estimate section: the train stage's peak and python-torch's
 * phases, predicted from the probe's model terms and this machine's torch calibration, beside
 * what the run measured. Never calibrates inside a run; without a cached torch calibration the
 * rows are absent and `trainingReason` says why.
 */
import type { Report, RuntimeReport } from "../report/schema.ts";
import { compareWithMeasured } from "./predict.ts";
import type { RuntimeEstimateCheck } from "./report-estimates.ts";
import { describeTrain, evalSamplesOf, inferEstimate, optimizerOf, trainEstimate } from "./torch-estimate.ts";
import { loadTorchCalibration, trainPeakOf } from "./torch-calibration.ts";
import { probeTerms, type TermsSource } from "./torch-terms.ts";

export interface TrainEstimateCheck {
  stage: string;
  arch: string;
  /** Predicted peak RSS of the training process over all its phases. */
  estimateMiB: number;
  measuredMiB: number;
  errorPct: number;
  parts: string;
  /** seeds/003's formula for the same model and batch, and its error against the measured peak. */
  naiveMiB: number;
  naiveErrorPct: number;
}

export interface TorchEstimates {
  training: TrainEstimateCheck | null;
  /** Why there is no training row (no train stage, no torch calibration, ...); null when there is one. */
  trainingReason: string | null;
  pythonTorch: RuntimeEstimateCheck | null;
}

export interface TorchRunFacts {
  train: { stage: string; arch: string; batchSize: number; threads: number } | null;
  /** The python-torch benchmark's arch, batch sizes (the largest counts), calls, eval samples and threads; null when none ran. */
  infer: { arch: string; batchSizes: number[]; maxBatch: number; evalSamples: number; threads: number; iterations: number; warmup: number } | null;
}

const pct = (est: number, meas: number) => (meas > 0 ? ((est - meas) / meas) * 100 : 0);

export async function torchEstimatesForReport(report: Report, facts: TorchRunFacts, terms: TermsSource = probeTerms): Promise<TorchEstimates> {
  // A run without a train stage has no training row and nothing to explain (compare runs).
  const none = (why: string): TorchEstimates => ({ training: null, trainingReason: facts.train ? why : null, pythonTorch: null });
  const torchRow = report.runtimes.find((r) => r.name === "python-torch");
  if (!facts.train && !(facts.infer && torchRow)) return none("no train stage");
  const cal = loadTorchCalibration();
  if (!cal) return none("no PyTorch calibration cached for this machine: run `memlane estimate <pipeline.ts> --calibrate`");
  let training: TrainEstimateCheck | null = null;
  const measured = trainPeakOf(report);
  if (facts.train && measured !== null) {
    const { arch } = facts.train;
    const shape = { batchSize: facts.train.batchSize, evalSamples: evalSamplesOf(arch), optimizer: optimizerOf(arch) };
    const e = trainEstimate(cal, await terms.train(arch, shape, facts.train.threads), shape);
    training = {
      stage: facts.train.stage, arch, estimateMiB: e.peakMiB, measuredMiB: measured, errorPct: pct(e.peakMiB, measured), parts: describeTrain(e),
      naiveMiB: e.naiveMiB, naiveErrorPct: pct(e.naiveMiB, measured),
    };
  }
  let pythonTorch: RuntimeEstimateCheck | null = null;
  if (facts.infer && torchRow) {
    const { arch, batchSizes, iterations, warmup, evalSamples, threads } = facts.infer;
    const phases = inferEstimate(cal, await terms.infer(arch, { batchSizes, iterations, warmup, evalSamples }, threads), facts.infer);
    const checks = compareWithMeasured({ runtime: "python-torch", features: { weightMiB: 0, convWeightMiB: 0, activationMiB: 0, evalMiB: 0, evalOutputMiB: 0, heldMiB: 0, largestBatchMiB: 0, loadMiB: 0, nativeReleasedMiB: 0, deadOutputMiB: 0, outputBufferMiB: 0, nativeWorkspaceMiB: 0, ortFirstRequestMiB: 0, loadTransientMiB: 0, deadOutputKeptMiB: 0, firstRequestMiB: 0, mappedWeightMiB: 0, socketEvalMiB: 0 }, phases }, torchRow as RuntimeReport);
    pythonTorch = { runtime: "python-torch", model: facts.infer.arch, phases: checks, steadyRssErrorPct: checks.at(-1)?.rss.errorPct ?? null };
  }
  return { training, trainingReason: training || !facts.train ? null : "the train stage has no measured phases", pythonTorch };
}
