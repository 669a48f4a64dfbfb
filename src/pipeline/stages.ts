/**
 * Stage definitions: what a pipeline module declares. The builder (builder.ts) validates
 * and freezes them; run.ts executes them.
 */
import type { LatencyTable } from "../report/schema.ts";
import type { PyBridge } from "../workers/python-bridge.ts";

export const RUNTIMES = ["python-torch", "python-ort", "node-ort", "native"] as const;
/** A runtime a `benchmark` stage can deploy the model on. */
export type Runtime = (typeof RUNTIMES)[number];

export const CHECKPOINT_METHODS = ["torch.load", "torch.load-mmap", "safetensors"] as const;
export type CheckpointMethod = (typeof CHECKPOINT_METHODS)[number];

/** Options every stage accepts. */
export interface StageCommon {
  /** Stage name; unique in the pipeline. */
  name?: string;
  /** Stages that must finish first. Defaults depend on the stage kind (see each method). */
  after?: string[];
  /** Run alone (nothing else runs meanwhile): keeps latency figures free of other load. */
  exclusive?: boolean;
}

export interface TrainOptions extends StageCommon {
  arch: string;
  epochs?: number;
  /** tiny-gpt: optimizer steps per epoch (its epochs are step counts, not passes over the data). */
  stepsPerEpoch?: number;
  seed?: number;
  batchSize?: number;
  lr?: number;
  device?: "cpu" | "cuda" | "auto";
  /** CPU threads of the training worker (default: the pipeline's `threads`). */
  threads?: number;
  /** Fail the stage when held-out accuracy is below this. */
  minAccuracy?: number;
}

export interface ExportOptions extends StageCommon {
  /** Train stage whose checkpoint to export (default: the last train stage). */
  from?: string;
  opset?: number;
  /** Export a zoo model with random weights instead of a trained checkpoint. */
  zoo?: string;
  /** Seed of the zoo model's random weights. */
  seed?: number;
  /** Use this existing ONNX file as is (no worker): `memlane compare` runs on it. */
  onnx?: string;
  /** Inputs generated for a zoo model or an existing ONNX file (no held-out set): how many samples. */
  evalSamples?: number;
}

export interface OrtSessionOptions {
  cpuMemArena?: boolean;
  memPattern?: boolean;
  ioBinding?: boolean;
  graphOptimizationLevel?: "disable" | "basic" | "extended" | "all";
}

export interface BenchmarkOptions extends StageCommon {
  /** Train (python-torch) or export (others) stage providing the model (default: the last one). */
  from?: string;
  batchSizes?: number[];
  iterations?: number;
  warmup?: number;
  threads?: number;
  device?: "cpu" | "cuda" | "auto";
  ort?: OrtSessionOptions;
}

export interface CheckpointLoadOptions extends StageCommon {
  /** Train stage whose checkpoint to load (default: the last one; not with `zoo`). */
  from?: string;
  /**
   * Load a zoo model's checkpoint with seeded random weights instead (written first by a
   * `zoo.checkpoint` worker): e.g. "resnet18", ~45 MiB, where the methods' costs differ
   * visibly; the trained digits CNN's 0.15 MiB vanish in noise.
   */
  zoo?: string;
  /** Seed of the zoo checkpoint's random weights (default 0). */
  seed?: number;
  methods?: CheckpointMethod[];
}

/** What the function of a `python` stage receives besides the bridge. */
export interface StageContext {
  runId: string;
  runDir: string;
  /** Results of the stages that finished, by name (benchmarks: BenchmarkResult). */
  results: ReadonlyMap<string, unknown>;
  /** Held-out labels and inputs of the pipeline (from the train or zoo export stage). */
  heldout(): HeldOut | null;
  /** A runtime's outputs (benchmark stage result), or null if it did not run. */
  benchmark(runtime: Runtime | string): BenchmarkResult | null;
  /** Writes `runs/<runId>/<name>` atomically; returns the path. */
  writeArtifact(name: string, data: string | Uint8Array): Promise<string>;
  log(line: string): void;
  signal: AbortSignal;
}

export type PythonStageFn = (py: PyBridge, ctx: StageContext) => Promise<unknown>;

export interface PythonStageOptions extends StageCommon {}

export interface HeldOut {
  inputs: Float32Array;
  /** null for generated inputs (zoo models). */
  labels: BigInt64Array | null;
  /** [n, ...sample shape] */
  shape: number[];
}

export interface BenchmarkResult {
  runtime: string;
  available: true;
  pid: number;
  device: string;
  latencyMs: LatencyTable;
  throughputPerS: number;
  outputs: Float32Array;
  outputShape: number[];
  accuracy: number | null;
  maxAbsDiff: number | null;
  /** Native only: arena bytes per sample vs the lower bound, from the compiler. */
  plan?: { path: string; arenaBytesPerSample: number; lowerBoundPerSample: number };
}

/** A benchmark whose runtime is missing (memlane-rt not built...): reported, not failed. */
export interface UnavailableRuntime {
  runtime: string;
  available: false;
  reason: string;
  /** Protocol error code recorded on the skipped stage (default BACKEND_UNAVAILABLE; UNSUPPORTED_OP for an op the compiler lacks). */
  code?: number;
}

export type StageDef =
  | { kind: "train"; name: string; after: string[]; exclusive: boolean; opts: Readonly<TrainOptions> }
  | { kind: "export"; name: string; after: string[]; exclusive: boolean; opts: Readonly<ExportOptions> }
  | {
      kind: "benchmark";
      name: string;
      after: string[];
      exclusive: boolean;
      runtime: Runtime;
      opts: Readonly<BenchmarkOptions>;
    }
  | {
      kind: "checkpoint-load";
      name: string;
      after: string[];
      exclusive: boolean;
      opts: Readonly<CheckpointLoadOptions>;
    }
  | { kind: "python"; name: string; after: string[]; exclusive: boolean; fn: PythonStageFn };
