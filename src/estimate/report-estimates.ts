/**
 * Estimate vs measured for a finished run: every report carries, per runtime and phase, what
 * the calibrated estimate predicted for this model and run shape beside what was measured,
 * with the error in %, and the naive formula's figure as a baseline. Without a calibration
 * for this machine the section says so (it never calibrates inside a run: that would add a
 * minute of probe runs to every pipeline).
 */
import type { PhaseCheck } from "./predict.ts";
import { compareWithMeasured, estimateRuntime, naiveMiB } from "./predict.ts";
import { CALIBRATED_RUNTIMES } from "./calibration.ts";
import { calibrationMismatch, loadCalibration } from "./cache.ts";
import { features, type InputFeed, loadProbesFor, modelTerms, type RunShape } from "./model-terms.ts";
import type { Report } from "../report/schema.ts";
import type { TrainEstimateCheck } from "./report-torch.ts";
import type { DeviceEstimateCheck } from "./report-device.ts";

export interface RuntimeEstimateCheck {
  runtime: string;
  /** The ONNX model the estimate was computed from. */
  model: string;
  phases: PhaseCheck[];
  /** The steady-state (last phase) RSS error, %: the headline figure. */
  steadyRssErrorPct: number | null;
}

export interface EstimateReport {
  status: "ok" | "unavailable";
  /** Why there is no estimate (no calibration, no ONNX model...); null when status is ok. */
  reason: string | null;
  calibratedAt: string | null;
  /** seeds/003's formula for the same model and batch (parameters x 4 B + a batch of inputs x 4 B), MiB. */
  naiveMiB: number | null;
  runtimes: RuntimeEstimateCheck[];
  // --- PyTorch (report-torch.ts): the train stage's peak; python-torch's rows are in `runtimes` ---
  /** The train stage's predicted peak beside the measured one, with the naive formula's; absent in older reports, null when not estimated. */
  training?: TrainEstimateCheck | null;
  /** Why `training` is null. */
  trainingReason?: string | null;
  /** Each distributed train stage's predicted rank peak beside its ranks' highest (torch-distributed.ts); absent in older reports. */
  distributed?: DistributedEstimateCheck[];
  /** Device memory of each memlane-rt benchmark that ran on CUDA (report-device.ts); absent where none did. */
  device?: DeviceEstimateCheck[];
}

export interface DistributedEstimateCheck {
  stage: string;
  arch: string;
  strategy: string;
  /** Ranks on this host. */
  ranks: number;
  /** Predicted peak RSS of one rank, and the highest any rank measured. */
  perRankEstimateMiB: number;
  perRankMeasuredMiB: number;
  errorPct: number;
  /** The launcher's predicted RSS (not measured: the launcher is not sampled). */
  launcherEstimateMiB: number;
  parts: string;
}

/** What a benchmark ran: its model, run shape and (a model with a symbolic sequence) what it fed, by report row name. */
export type EstimatedRuns = ReadonlyMap<string, { onnx: string; run: RunShape; feed?: InputFeed }>;

export async function estimatesForReport(report: Report, runs: EstimatedRuns, tmpDir?: string): Promise<EstimateReport> {
  const none = (reason: string): EstimateReport => ({ status: "unavailable", reason, calibratedAt: null, naiveMiB: null, runtimes: [] });
  const rows = report.runtimes.filter((r) => (CALIBRATED_RUNTIMES as readonly string[]).includes(r.name) && runs.has(r.name));
  if (rows.length === 0) return none("no ONNX runtime (python-ort, node-ort, native) ran an ONNX model in this run");
  const cal = loadCalibration();
  if (!cal) {
    const why = calibrationMismatch();
    return none(`no calibration cached for this machine and these library versions${why ? ` (${why})` : ""}: run \`memlane estimate --calibrate\``);
  }
  const out: RuntimeEstimateCheck[] = [];
  let naive: number | null = null;
  const termsOf = new Map<string, Awaited<ReturnType<typeof modelTerms>>>(); // one compile per model and feed, not per runtime
  for (const r of rows) {
    const { onnx, run, feed = {} } = runs.get(r.name)!;
    const key = `${onnx} ${JSON.stringify(feed)}`;
    if (!termsOf.has(key)) termsOf.set(key, await modelTerms(onnx, feed, { ...loadProbesFor(rows.map((x) => x.name)), ...(tmpDir !== undefined ? { tmpDir } : {}) }));
    const terms = termsOf.get(key)!;
    naive ??= naiveMiB(terms, run);
    const e = estimateRuntime(cal, r.name, features(r.name, terms, run));
    if (!e) continue;
    const phases = compareWithMeasured(e, r);
    const last = phases.at(-1);
    out.push({ runtime: r.name, model: onnx, phases, steadyRssErrorPct: last ? last.rss.errorPct : null });
  }
  return { status: "ok", reason: null, calibratedAt: cal.createdAt, naiveMiB: naive, runtimes: out };
}
