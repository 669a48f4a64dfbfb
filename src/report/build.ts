/**
 * Builds the report object (schema.ts) from what a run collected: phase marks and task
 * results per process, the sampler's tracks, stages and GPU status. Pure apart from the
 * host description (overridable), so it is tested on recorded data.
 */
import { combinePhases, type PhaseFigures, type PhaseMarkInput } from "../memory/phases.ts";
import type { Sample, TrackedProcess } from "../memory/sampler.ts";
import { Phase } from "../transport/protocol.ts";
import { breakdownReport } from "./breakdown.ts";
import type { RuntimeProfile } from "./profile.ts";
import { distributedReports, type DistributedRecord } from "./distributed.ts";
export type { DistributedRecord } from "./distributed.ts";
import { buildComparison } from "./comparison.ts";
import { hostInfo } from "./host.ts";
import {
  REPORT_SCHEMA_VERSION,
  type CheckpointLoadMethod,
  type CheckpointLoadReport,
  type GpuReport,
  type HostInfo,
  type InputReport,
  type OutputReport,
  type RuntimeNotRun,
  type LatencyTable,
  type PhaseReport,
  type ProcessInfo,
  type Report,
  type RuntimeReport,
  type StageReport,
  type SteadyMemory,
  type TimelineTrack,
  type TrainingReport,
  type TransportReport,
} from "./schema.ts";

export interface RuntimeRecord {
  name: string;
  process: ProcessInfo;
  device: string;
  versions: Record<string, string>;
  /** The runtime task's phase marks (from `phase` messages; node-ort's from its child's IPC messages). */
  marks: PhaseMarkInput[];
  latencyMs: LatencyTable;
  throughputPerS: number;
  /** Samples/s with requests pipelined (infer.native's or, on CUDA, infer.torch's result); absent or null when not measured. */
  pipelinedThroughputPerS?: number | null;
  /** What the backend did with its switches (memlane-rt's result); absent, null or "" when none. */
  backendNotes?: string | null;
  accuracy: number | null;
  maxAbsDiff: number | null;
  /** Every graph output and its diff against the reference (numerics.ts). */
  outputs?: OutputReport[];
  /** Per-op profile (benchmark option `profile`). */
  profile?: RuntimeProfile;
}

export interface TrainingRecord {
  accuracy: number;
  epochs: number;
  device: string;
  process: ProcessInfo;
  marks: PhaseMarkInput[];
  /** The train stage's name and its tensor bytes (what a distributed stage is compared with). */
  stage?: string;
  tensorBytes?: { params: number; grads: number; optimizer: number };
}

export interface CheckpointLoadRecord {
  method: CheckpointLoadMethod;
  /** Model whose checkpoint was loaded. */
  arch?: string;
  pid: number;
  /** Checkpoint file size in bytes (the task's `bytes`). */
  bytes: number;
  marks: PhaseMarkInput[];
}

/** Everything a run collected; the input of buildReport. */
export interface RunRecord {
  pipeline: string;
  runId: string;
  createdAt?: Date;
  training: TrainingRecord | null;
  runtimes: RuntimeRecord[];
  checkpointLoad?: CheckpointLoadRecord[];
  /** MemorySampler.snapshot() at the end of the run. */
  tracks: TrackedProcess[];
  stages: StageReport[];
  gpu: GpuReport;
  /** Runtime whose outputs are the reference; default `python-torch` when it ran. */
  numericsReference?: string | null;
  /** Defaults to this machine (hostInfo()), with Python's version from the runtimes' versions. */
  host?: HostInfo;
  /** Default "complete". */
  outcome?: Report["outcome"];
  notes?: string[];
  runtimesNotRun?: RuntimeNotRun[];
  inputs?: InputReport[];
  transport?: TransportReport;
  distributed?: DistributedRecord[];
}

/**
 * The report's `gpu` section from a sampler's gpuStatus() (and the devices the GPU probe
 * lists): unavailable with its reason, or available.
 */
export function gpuReport(status: { ok: boolean; reason?: string }, devices: GpuReport["devices"] = []): GpuReport {
  return status.ok
    ? { status: "available", reason: null, devices }
    : { status: "unavailable", reason: status.reason ?? "unknown", devices };
}

const round = (x: number, digits = 2): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};
const finiteOrNull = (x: number | null | undefined): number | null => (typeof x === "number" && Number.isFinite(x) ? x : null);
export const toMiB = (kib: number): number => round(kib / 1024);
const toMiBOrNull = (kib: number | null): number | null => (kib === null ? null : toMiB(kib));

function samplesOf(tracks: readonly TrackedProcess[], pid: number) {
  return tracks.filter((t) => t.pid === pid).flatMap((t) => t.samples);
}

/**
 * The worker's mallinfo2 figures at the marks; null where it sent none (it cannot read them).
 * A mark with an unsound count never gets here: the codec refuses it (check-phase.ts).
 */
function mallocFigures(f: PhaseFigures): Pick<PhaseReport, "mallocFreeMiB" | "deltaMallocFreeMiB" | "mallocInUseMiB"> {
  const endFree = finiteOrNull(f.end.mallocFreeKiB);
  const startFree = finiteOrNull(f.start.mallocFreeKiB);
  const inUse = finiteOrNull(f.end.mallocInUseKiB);
  return {
    mallocFreeMiB: toMiBOrNull(endFree),
    deltaMallocFreeMiB: endFree !== null && startFree !== null ? toMiB(endFree - startFree) : null,
    mallocInUseMiB: toMiBOrNull(inUse),
  };
}

function phaseReport(f: PhaseFigures, gpuAvailable: boolean): PhaseReport {
  const gpuKnown = gpuAvailable && f.gpuEndKiB !== null;
  return {
    name: f.name,
    rssMiB: toMiB(f.end.rssKiB),
    pssMiB: toMiB(f.end.pssKiB),
    ussMiB: toMiB(f.end.ussKiB),
    deltaRssMiB: toMiB(f.deltaRssKiB),
    deltaUssMiB: toMiB(f.deltaUssKiB),
    peakRssMiB: toMiB(f.peakRssKiB),
    peakSource: f.peakSource,
    swapMiB: toMiB(f.end.swapKiB),
    ms: f.ms,
    startMs: f.startMs,
    endMs: f.endMs,
    samples: f.samples,
    gpu: gpuKnown ? "available" : "unavailable",
    gpuMiB: gpuKnown ? toMiBOrNull(f.gpuEndKiB) : null,
    deltaGpuMiB: gpuKnown && f.gpuStartKiB !== null && f.gpuEndKiB !== null ? toMiB(f.gpuEndKiB - f.gpuStartKiB) : null,
    peakGpuMiB: gpuKnown ? toMiBOrNull(f.gpuPeakKiB) : null,
    ...mallocFigures(f),
    breakdown: breakdownReport(f.smaps),
    ...(f.smaps.problem ? { breakdownProblem: f.smaps.problem } : {}),
  };
}

export function phasesOf(marks: readonly PhaseMarkInput[], tracks: readonly TrackedProcess[], pid: number, gpu: boolean) {
  return combinePhases(marks, samplesOf(tracks, pid)).map((f) => phaseReport(f, gpu));
}

/**
 * Reading at the end of steady-inference, else of the last phase, else (a runtime that sent
 * no phase marks) the last orchestrator sample of its process that read smaps_rollup.
 */
function steadyOf(name: string, phases: readonly PhaseReport[], samples: readonly Sample[], gpuOn: boolean): SteadyMemory {
  const p = phases.find((x) => x.name === Phase.STEADY_INFERENCE) ?? phases[phases.length - 1];
  if (p !== undefined) return { rssMiB: p.rssMiB, ussMiB: p.ussMiB, pssMiB: p.pssMiB, gpuMiB: p.gpuMiB };
  const s = samples.reduce<Sample | undefined>((a, b) => (b.ussKiB !== null && (a === undefined || b.tMs > a.tMs) ? b : a), undefined);
  if (s === undefined || s.ussKiB === null || s.pssKiB === null)
    throw new Error(`buildReport: runtime "${name}" has no completed phase and no sample with smaps_rollup figures, so no memory reading to report`);
  return { rssMiB: toMiB(s.rssKiB), ussMiB: toMiB(s.ussKiB), pssMiB: toMiB(s.pssKiB), gpuMiB: gpuOn ? toMiBOrNull(s.gpuKiB) : null };
}

function checkpointLoadReport(c: CheckpointLoadRecord, tracks: readonly TrackedProcess[]): CheckpointLoadReport {
  const phases = phasesOf(c.marks, tracks, c.pid, false);
  const load = phases.find((p) => p.name === Phase.MODEL_LOAD);
  if (load === undefined) throw new Error(`buildReport: checkpoint.load (${c.method}) has no completed "${Phase.MODEL_LOAD}" phase`);
  const first = phases.find((p) => p.name === Phase.FIRST_INFERENCE);
  return {
    method: c.method,
    pid: c.pid,
    fileMiB: round(c.bytes / 2 ** 20),
    deltaRssMiB: load.deltaRssMiB,
    deltaUssMiB: load.deltaUssMiB,
    peakRssMiB: load.peakRssMiB,
    ms: load.ms,
    ...(c.arch !== undefined ? { arch: c.arch } : {}),
    peakDeltaRssMiB: round(load.peakRssMiB - (load.rssMiB - load.deltaRssMiB)),
    firstInferenceDeltaRssMiB: first?.deltaRssMiB ?? null,
  };
}

function timelineOf(tracks: readonly TrackedProcess[]): TimelineTrack[] {
  return tracks.map((t) => ({
    label: t.label,
    pid: t.pid,
    periodMs: t.periodMs,
    samples: t.samples.map((s) => [s.tMs, s.rssKiB, s.ussKiB, s.gpuKiB] as TimelineTrack["samples"][number]),
  }));
}

export function buildReport(run: RunRecord): Report {
  const gpuOn = run.gpu.status === "available";
  const runtimes: RuntimeReport[] = run.runtimes.map((r) => {
    const phases = phasesOf(r.marks, run.tracks, r.process.pid, gpuOn);
    return {
      name: r.name,
      pid: r.process.pid,
      process: r.process,
      device: r.device,
      versions: r.versions,
      phases,
      steady: steadyOf(r.name, phases, samplesOf(run.tracks, r.process.pid), gpuOn),
      accuracy: r.accuracy,
      maxAbsDiff: r.maxAbsDiff,
      latencyMs: r.latencyMs,
      throughputPerS: r.throughputPerS,
      pipelinedThroughputPerS: finiteOrNull(r.pipelinedThroughputPerS),
      backendNotes: r.backendNotes?.trim() || null,
      ...(r.outputs ? { outputs: r.outputs } : {}),
      ...(r.profile ? { profile: r.profile } : {}),
    };
  });
  const training: TrainingReport | null = run.training && {
    accuracy: run.training.accuracy,
    epochs: run.training.epochs,
    phases: phasesOf(run.training.marks, run.tracks, run.training.process.pid, gpuOn),
    pid: run.training.process.pid,
    process: run.training.process,
    device: run.training.device,
    ...(run.training.stage !== undefined ? { stage: run.training.stage } : {}),
    ...(run.training.tensorBytes ? { tensorBytes: run.training.tensorBytes } : {}),
  };
  const reference =
    run.numericsReference !== undefined
      ? run.numericsReference
      : runtimes.some((r) => r.name === "python-torch") ? "python-torch" : null;
  const python = run.runtimes.map((r) => r.versions["python"]).find((v) => v !== undefined) ?? null;
  return {
    schemaVersion: REPORT_SCHEMA_VERSION,
    pipeline: run.pipeline,
    runId: run.runId,
    createdAt: (run.createdAt ?? new Date()).toISOString(),
    host: run.host ?? hostInfo(python),
    training,
    ...(run.distributed?.length ? { distributed: distributedReports(run.distributed, run.tracks, gpuOn, training) } : {}),
    runtimes,
    ...(run.runtimesNotRun?.length ? { runtimesNotRun: run.runtimesNotRun } : {}),
    ...(run.inputs ? { inputs: run.inputs } : {}),
    checkpointLoad: (run.checkpointLoad ?? []).map((c) => checkpointLoadReport(c, run.tracks)),
    comparison: buildComparison(runtimes),
    numerics: {
      reference,
      runtimes: runtimes.map((r) => ({
        name: r.name, maxAbsDiff: r.maxAbsDiff, accuracy: r.accuracy,
        ...(r.outputs ? { outputs: r.outputs.map((o) => ({ name: o.name, maxAbsDiff: o.maxAbsDiff })) } : {}),
      })),
    },
    gpu: run.gpu,
    stages: run.stages,
    timeline: timelineOf(run.tracks),
    outcome: run.outcome ?? "complete",
    notes: [...(run.notes ?? [])],
    ...(run.transport ? { transport: run.transport } : {}),
  };
}
