/**
 * The shape of `runs/<runId>/report.json`: the one definition, in TypeScript. docs/report.md
 * describes every field. Fields are only ever added (never renamed); an incompatible change
 * bumps REPORT_SCHEMA_VERSION.
 *
 * Units: memory in MiB (MiB = KiB / 1024, from /proc and NVML), time in ms. A figure that was
 * not measured is `null` (never 0); GPU figures come with a `gpu` status saying why.
 */
import type { PhaseName } from "../transport/protocol.ts";
import type { LimitCheck } from "./limits.ts";
import type { EstimateReport } from "../estimate/report-estimates.ts";
import type { RuntimeProfile } from "./profile.ts";

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
  /**
   * Freed memory glibc's malloc keeps at the phase end (mallinfo2 fordblks, every arena): part
   * of RSS that the process freed but malloc did not give back. null where the process cannot
   * read it (node-ort, memlane-rt, a C library without mallinfo2). Absent from older reports.
   */
  mallocFreeMiB?: number | null;
  /** mallocFreeMiB at the end minus at the start; null when either is unknown. Absent from older reports. */
  deltaMallocFreeMiB?: number | null;
  /** Bytes malloc has handed out at the phase end (mallinfo2 uordblks + hblkhd); null likewise. Absent from older reports. */
  mallocInUseMiB?: number | null;
  /**
   * Where the RAM is at the phase end, by kind of mapping (from the process's own
   * /proc/self/smaps at the mark), and what each kind grew over the phase. null when the
   * process sent no per-mapping summary (older workers). Absent from older reports.
   */
  breakdown?: MemoryBreakdown | null;
  /** Why the process's per-mapping summary could not be used (malformed), naming the mark; absent when fine. */
  breakdownProblem?: string;
}

/** A file (or pseudo-name such as `[anon]`) under a kind, at the phase end. */
export interface MemoryKindFile {
  path: string;
  rssMiB: number;
  ussMiB: number;
  deltaRssMiB: number | null;
}

/** One kind of mapping at a phase end (docs/memory.md, "Where the RAM goes"). */
export interface MemoryKindReport {
  /** `lib:<package>` (`lib:torch`, `lib:onnxruntime`, `lib:CUDA`, `lib:python`, ...), `heap`, `anonymous`, `stacks`, `model-files`, `shm`, `gpu-driver`, `other`. */
  kind: string;
  /** `torch libs`, `thread stacks`, ... */
  label: string;
  rssMiB: number;
  pssMiB: number;
  /** Private_Clean + Private_Dirty of the kind's mappings. */
  ussMiB: number;
  privateDirtyMiB: number;
  swapMiB: number;
  /** Growth over the phase (end minus the summary growth is measured from); null when there is none. */
  deltaRssMiB: number | null;
  deltaUssMiB: number | null;
  deltaPssMiB: number | null;
  /** The biggest files under the kind (by RSS, at most MAX_KIND_FILES); `(N more)` sums the rest. */
  files: MemoryKindFile[];
}

export interface MemoryBreakdown {
  /** Every kind with RSS or growth, biggest RSS first. */
  kinds: MemoryKindReport[];
  /** Sums over every mapping of the reading: the same moment's smaps_rollup within 1 % (docs/memory.md). */
  totalRssMiB: number;
  totalPssMiB: number;
  totalUssMiB: number;
  /** What growth is measured from: the phase's start mark, an earlier mark (the previous phase's end), or nothing (deltas null). */
  growthFrom: "start" | "earlier-mark" | null;
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
  /** `python` (Python worker), `memlane-rt` (native worker), `node` (node-ort's child Node process). */
  kind: "python" | "memlane-rt" | "node" | string;
  /** argv as started. */
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
  /**
   * Every graph output over the eval set (batch first) and its max abs diff against the
   * reference's same output (null for the reference); `maxAbsDiff` is the worst of them.
   * Absent from reports written before it was added.
   */
  outputs?: OutputReport[];
  /** Per-op time (docs/profiling.md), present only when the run was asked to profile. */
  profile?: RuntimeProfile;
}

export interface OutputReport {
  name: string;
  dtype: string;
  shape: number[];
  maxAbsDiff: number | null;
}

/** A runtime that did not run: could not start (`unavailable`) or failed in a run that went on without it (`failed`). */
export interface RuntimeNotRun {
  name: string;
  status: "unavailable" | "failed";
  error: { code: number; name: string; message: string };
}

/** One graph input of an existing ONNX model as every runtime was fed it. */
export interface InputReport {
  name: string;
  dtype: string;
  /** The model's shape as fed, -1 at the batch axis. */
  shape: number[];
  batchAxis: number;
  /** What the values are: "ids in [0, 1000) (indices of Gather ...)", "ones (mask)", "from FILE"... */
  values: string;
}

export interface TrainingReport {
  /** Held-out accuracy after the last epoch. */
  accuracy: number;
  epochs: number;
  phases: PhaseReport[];
  pid: number;
  process: ProcessInfo;
  device: string;
  /** The train stage (added with distributed training; absent in older reports). */
  stage?: string;
  /** Bytes of parameters, gradients and optimizer state after the last step, read from the tensors. */
  tensorBytes?: TensorBytes;
}

export interface TensorBytes {
  params: number;
  grads: number;
  optimizer: number;
}

/** One rank of a distributed train stage: its own process, phases and tensors. */
export interface DistributedRankReport {
  rank: number;
  host: string;
  pid: number;
  accuracy: number;
  phases: PhaseReport[];
  /** What this rank held after its last step, from its local tensors (an FSDP shard by its size). */
  tensorBytes: TensorBytes | null;
}

/** A distributed train stage (docs/distributed.md): every rank beside the single-process run. */
export interface DistributedReport {
  stage: string;
  arch: string;
  strategy: string;
  backend: string;
  nproc: number;
  nnodes: number;
  launcher: { pid: number; command: string[] };
  /** How many times torch.distributed.run restarted the group before the ranks reported. */
  restarts: number;
  note: string | null;
  ranks: DistributedRankReport[];
  /** The pipeline's single-process train stage of the same model, when there is one. */
  single: { stage: string | null; pid: number; accuracy: number; peakRssMiB: number; tensorBytes: TensorBytes | null } | null;
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
  /**
   * Every attempt, in order (added in v1; absent in older reports): more than one when the
   * stage's worker died and the stage was retried (its `retries` option). The stage's pid
   * and figures are those of the last attempt.
   */
  attempts?: StageAttempt[];
}

/** One attempt of a stage: its worker, when it ran and how it ended. */
export interface StageAttempt {
  /** 1, 2, ... */
  attempt: number;
  pid: number | null;
  startMs: number;
  endMs: number;
  status: "ok" | "failed" | "cancelled";
  /** How it ended when it failed: "SIGKILL", "exit code 3", "timed out", "error: ..."; null when ok. */
  exit: string | null;
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

/**
 * A sample: [wall clock ms, RSS KiB, USS KiB or null on a tick that did not read smaps_rollup
 * (the sampler paces those by their cost), GPU KiB or null when unavailable].
 */
export type TimelineSample = [tMs: number, rssKiB: number, ussKiB: number | null, gpuKiB: number | null];

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
  runtimes: Array<{ name: string; maxAbsDiff: number | null; accuracy: number | null; outputs?: Array<{ name: string; maxAbsDiff: number | null }> }>;
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
  /** Distributed train stages (absent when there is none). */
  distributed?: DistributedReport[];
  runtimes: RuntimeReport[];
  /** Runtimes asked for that did not run, with why (absent from older reports: read as []). */
  runtimesNotRun?: RuntimeNotRun[];
  /** The graph inputs fed to an existing ONNX model (compare); absent for trained and zoo models. */
  inputs?: InputReport[];
  checkpointLoad: CheckpointLoadReport[];
  comparison: ComparisonReport;
  numerics: NumericsReport;
  gpu: GpuReport;
  stages: StageReport[];
  timeline: TimelineTrack[];
  /**
   * "complete" when every stage ran, "failed" for the partial report a failed run writes
   * (its stages say which failed). Added in v1; absent in older reports (complete).
   */
  outcome?: "complete" | "failed";
  /**
   * What a reader of the figures must know about the run: another memlane run active on the
   * machine (its USS/PSS and timings are skewed), stages retried, shared memory used, python
   * stage output. Added in v1; absent in older reports.
   */
  notes?: string[];
  /**
   * The memory budgets the pipeline's stages declared, each checked against this report
   * (src/report/limits.ts). Absent from reports of pipelines without budgets and from older reports.
   */
  budgets?: LimitCheck[];
  /**
   * The calibrated memory estimate beside what was measured, per runtime and phase
   * (src/estimate/report-estimates.ts). Absent from older reports.
   */
  estimates?: EstimateReport;
  /** What the broker refused during the run (docs/protocol.md, "Refused messages"); added later, like notes. */
  transport?: TransportReport;
}

/** The run's message size limit and its refused messages, counted by reason. */
export interface TransportReport {
  maxMessageBytes: number;
  refused: { total: number; byReason: Record<string, number> };
}
