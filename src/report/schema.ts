/**
 * The shape of `runs/<runId>/report.json`: the one definition, in TypeScript. docs/report.md
 * describes every field. Fields are only ever added (never renamed); an incompatible change
 * bumps REPORT_SCHEMA_VERSION.
 *
 * Units: memory in MiB (MiB = KiB / 1024, from /proc and NVML), time in ms. A figure that was
 * not measured is `null` (never 0); GPU figures come with a `gpu` status saying why.
 */
import type { PhaseName } from "../transport/protocol.ts";

export const REPORT_SCHEMA_VERSION = 1;

/** Whether GPU figures could be measured (NVML present and answering). */
export type GpuStatus = "available" | "unavailable";

/** One phase of one process: readings at its end, increments over it, its peak. */
export interface PhaseReport {
  /** Phase name from the protocol (`import`, `model-load`, `epoch-1`, ...). */
  name: PhaseName | string;
  /** The process's RSS at the phase end (worker's own /proc/self reading). */
  rssMiB: number;
  /** PSS at the phase end (shared pages split between the processes mapping them). */
  pssMiB: number;
  /** USS at the phase end: Private_Clean + Private_Dirty. */
  ussMiB: number;
  /** RSS at end minus RSS at start. */
  deltaRssMiB: number;
  /** USS at end minus USS at start. */
  deltaUssMiB: number;
  /** Highest RSS inside the phase: max(VmHWM at end after a reset at start, sampled RSS, end RSS). */
  peakRssMiB: number;
  /** Which source gave peakRssMiB: the kernel high-water mark, an orchestrator sample, or the end reading. */
  peakSource: "hwm" | "sample" | "end";
  /** Swap at the phase end. */
  swapMiB: number;
  /** Duration: endMs - startMs. */
  ms: number;
  /** Wall clock (ms since the epoch) of the start and end marks. */
  startMs: number;
  endMs: number;
  /** Orchestrator samples of this process that fell inside [startMs, endMs]. */
  samples: number;
  /** Whether the GPU fields below were measured. */
  gpu: GpuStatus;
  /** GPU memory used by this process at the phase end (NVML); null when unavailable. */
  gpuMiB: number | null;
  /** GPU end minus GPU start; null when unavailable. */
  deltaGpuMiB: number | null;
  /** Highest sampled GPU usage inside the phase; null when unavailable. */
  peakGpuMiB: number | null;
}

/** p50/p99/mean of `iterations` timed calls, measured inside the worker. */
export interface LatencyStats {
  p50: number;
  p99: number;
  mean: number;
  /**
   * Wall time per request with `iterations` requests submitted back to back and then drained
   * (memlane-rt's pipelined timing; infer.torch's on CUDA). Present only where the runtime timed it that way.
   */
  pipelinedMean?: number;
}

/** `batch<N>` → stats, e.g. `batch1`, `batch64`. */
export type LatencyTable = { [batch: `batch${number}`]: LatencyStats };

/** How a process was started. */
export interface ProcessInfo {
  pid: number;
  /** `python` (Python worker), `memlane-rt` (native worker), `node` (orchestrator, worker_thread). */
  kind: "python" | "memlane-rt" | "node" | string;
  /** argv as started (for `node`, the orchestrator's own argv). */
  command: string[];
}

/** Steady-state footprint: the reading at the end of `steady-inference`. */
export interface SteadyMemory {
  rssMiB: number;
  ussMiB: number;
  pssMiB: number;
  /** null when GPU is unavailable. */
  gpuMiB: number | null;
}

export interface RuntimeReport {
  /** `python-torch`, `python-ort`, `node-ort`, `native`, ... */
  name: string;
  pid: number;
  process: ProcessInfo;
  /** `cpu`, `cuda`, `cuda:0`... as the runtime reported it. */
  device: string;
  /** component → version string (from hello.versions or the runtime itself). */
  versions: Record<string, string>;
  phases: PhaseReport[];
  steady: SteadyMemory;
  /** Held-out accuracy of this runtime's outputs; null without labels. */
  accuracy: number | null;
  /** Max |output - reference output|; null for the reference itself or without one. */
  maxAbsDiff: number | null;
  latencyMs: LatencyTable;
  /** Samples per second at the largest batch size. */
  throughputPerS: number;
  /**
   * Samples per second at the largest batch size with requests submitted back to back and
   * drained (memlane-rt on CUDA: where overlap, asyncOutputs and contexts act; python-torch on
   * CUDA too). null where the runtime did not time it so: ORT, node-ort, anything on the CPU.
   * Absent from reports written before it was added (read as null).
   */
  pipelinedThroughputPerS: number | null;
  /**
   * What the backend did with its switches (memlane-rt: "cudaGraph: batch 16 captured; ..."),
   * or null where the runtime has none or said nothing. Absent from older reports (read as null).
   */
  backendNotes: string | null;
}

export interface TrainingReport {
  /** Held-out accuracy after the last epoch. */
  accuracy: number;
  epochs: number;
  phases: PhaseReport[];
  pid: number;
  process: ProcessInfo;
  device: string;
}

export type CheckpointLoadMethod = "torch.load" | "torch.load-mmap" | "safetensors";

/** One `checkpoint.load` task: what loading the same weights costs by each method. */
export interface CheckpointLoadReport {
  method: CheckpointLoadMethod;
  pid: number;
  /** Checkpoint file size in MiB. */
  fileMiB: number;
  /** Increment and peak of the `model-load` phase. */
  deltaRssMiB: number;
  deltaUssMiB: number;
  peakRssMiB: number;
  ms: number;
  /** Model whose checkpoint was loaded (reports written before this field lack it). */
  arch?: string;
  /** `model-load`'s peak RSS minus the RSS at its start: the transient cost (torch.load's second copy). */
  peakDeltaRssMiB?: number;
  /**
   * RSS increment of `first-inference` (one forward pass at batch 1 after the load): where a
   * mapped checkpoint's pages are read in. null when the task marked no such phase.
   */
  firstInferenceDeltaRssMiB?: number | null;
}

/** A stage of the pipeline as the scheduler ran it. */
export interface StageReport {
  name: string;
  /** Task name (`train`, `export`, `infer.ort`, ...) or `inline` for TypeScript code. */
  kind: string;
  /** Worker name/kind that ran it (`python`, `memlane-rt`, `node`). */
  worker: string;
  pid: number | null;
  startMs: number;
  endMs: number;
  status: "ok" | "failed" | "skipped" | "cancelled";
  /** Present when status is failed/cancelled. */
  error?: { code: number; name: string; message: string };
}

export interface GpuDevice {
  index: number;
  name: string;
  totalMiB: number;
  /** Device-wide used memory at report time; null if unknown. */
  usedMiB: number | null;
  driver: string | null;
}

export interface GpuReport {
  status: GpuStatus;
  /** Why GPU is unavailable (no driver, no NVML, no probe...); null when available. */
  reason: string | null;
  devices: GpuDevice[];
}

/** One runtime's row in a side-by-side comparison of a counter. */
export interface ComparisonSteadyRow {
  runtime: string;
  rssMiB: number;
  ussMiB: number;
  pssMiB: number;
  gpuMiB: number | null;
}

/** One phase across runtimes; a runtime that did not mark the phase is null. */
export interface ComparisonPhaseRow {
  phase: string;
  byRuntime: Record<string, { deltaRssMiB: number; deltaUssMiB: number; peakRssMiB: number; ms: number } | null>;
}

/** numerator / denominator of one counter, e.g. native steady USS / python-ort steady USS. */
export interface ComparisonRatio {
  counter: "steady.rssMiB" | "steady.ussMiB" | "steady.pssMiB" | "latencyMs.batch1.p50" | "throughputPerS" | string;
  numerator: string;
  denominator: string;
  /** null when the denominator is 0 or either figure is unknown. */
  value: number | null;
}

export interface ComparisonReport {
  steady: ComparisonSteadyRow[];
  phases: ComparisonPhaseRow[];
  /** Every non-Python runtime against every Python runtime, per counter. */
  ratios: ComparisonRatio[];
}

/** A sample: [wall clock ms, RSS KiB, USS KiB, GPU KiB or null when unavailable]. */
export type TimelineSample = [tMs: number, rssKiB: number, ussKiB: number, gpuKiB: number | null];

export interface TimelineTrack {
  /** Label the process was tracked under (runtime or stage name). */
  label: string;
  pid: number;
  samples: TimelineSample[];
  /** Sampling period actually used, ms (after decimation of a long run). */
  periodMs: number;
}

export interface NumericsReport {
  /** Runtime whose outputs are the reference (python-torch), null if none ran. */
  reference: string | null;
  runtimes: Array<{ name: string; maxAbsDiff: number | null; accuracy: number | null }>;
}

export interface HostInfo {
  cpuModel: string;
  cores: number;
  memTotalMiB: number;
  platform: string;
  kernel: string;
  node: string;
  /** null when no Python worker reported its version. */
  python: string | null;
}

export interface Report {
  schemaVersion: number;
  pipeline: string;
  runId: string;
  /** ISO 8601. */
  createdAt: string;
  host: HostInfo;
  /** null when the pipeline has no train stage. */
  training: TrainingReport | null;
  runtimes: RuntimeReport[];
  checkpointLoad: CheckpointLoadReport[];
  comparison: ComparisonReport;
  numerics: NumericsReport;
  gpu: GpuReport;
  stages: StageReport[];
  timeline: TimelineTrack[];
  /**
   * Run notes, one sentence each (refused messages, shared-memory use, ...). Added after v1
   * reports were first written: absent in older ones.
   */
  notes?: string[];
  /** What the broker refused during the run (docs/protocol.md, "Refused messages"); added later, like notes. */
  transport?: TransportReport;
}

/** The run's message size limit and its refused messages, counted by reason. */
export interface TransportReport {
  maxMessageBytes: number;
  refused: { total: number; byReason: Record<string, number> };
}
