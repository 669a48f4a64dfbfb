/**
 * Stage definitions: what a pipeline module declares. The builder (builder.ts) validates
 * and freezes them; run.ts executes them.
 */
import type { MemoryBudget } from "./budgets.ts";
import type { LatencyTable } from "../report/schema.ts";
import type { PyBridge } from "../workers/python-bridge.ts";
import type { Tensor, TensorData } from "../transport/codec.ts";
import type { DType } from "../transport/protocol.ts";
import type { EvalSet } from "./inputs/eval-set.ts";
import type { ShapeOverrides } from "./inputs/shapes.ts";

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
  /**
   * How many times the stage runs again, in a fresh worker, when its worker dies (a signal,
   * an exit, a timeout); errors the worker reports are not retried. Default 1 for train,
   * export and python stages, 0 for benchmark and checkpoint-load (measurements), at most 10.
   * Every attempt is in the report; a retried benchmark's figures come from one attempt.
   */
  retries?: number;
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
  /** Memory ceilings of the training process in every phase; exceeded → the run exits 1 (src/pipeline/budgets.ts). */
  budget?: MemoryBudget;
  /**
   * Train with torch.distributed: `nproc` ranks started by `python -m torch.distributed.run`
   * (c10d rendezvous), each a memlane worker measured like any other; `retries` becomes the
   * launcher's `--max-restarts`. docs/distributed.md.
   */
  distributed?: DistributedOptions;
}

export const DIST_STRATEGIES = ["ddp", "fsdp"] as const;
export const DIST_BACKENDS = ["gloo", "nccl"] as const;

export interface DistributedOptions {
  /** Ranks on this host (`--nproc-per-node`). */
  nproc: number;
  /** DDP replicates parameters, gradients and optimizer state on every rank; FSDP shards them. */
  strategy: (typeof DIST_STRATEGIES)[number];
  /** Default "gloo". "nccl" needs CUDA: refused without it unless `allowCpuFallback`. */
  backend?: (typeof DIST_BACKENDS)[number];
  /** With backend "nccl" and no CUDA: train with gloo on the CPU instead of failing (said in the report). */
  allowCpuFallback?: boolean;
  /** Hosts taking part (`--nnodes`, default 1); more than 1 needs `rdzvEndpoint`. */
  nnodes?: number;
  /** host:port of the c10d rendezvous store (default: 127.0.0.1 and a free port). */
  rdzvEndpoint?: string;
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
  /**
   * With `onnx`: shapes of inputs with symbolic dims, input name → full shape ("N" or any
   * number at the batch axis), as `memlane compare --shape` (docs/worker-tasks.md, "Several inputs and outputs").
   */
  shapes?: ShapeOverrides;
  /** With `onnx`: the value of every symbolic non-batch dim `shapes` leaves open (default 128). */
  seq?: number;
  /** With `onnx`: an .npz or .safetensors file with one array per graph input, fed instead of generated inputs. */
  inputs?: string;
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
  /**
   * The run goes on when this runtime fails: its report row carries the error instead
   * (`memlane compare` sets it: runtimes there are independent). Default false: a failure fails the run.
   */
  optional?: boolean;
  /** Memory ceilings of this runtime's process in every phase; exceeded → the run exits 1 (src/pipeline/budgets.ts). */
  budget?: MemoryBudget;
  /**
   * Per-op time in the report (docs/profiling.md): after the timed calls, `iterations` more
   * calls (default the stage's) at `batch` (default the first batch size) with the runtime's
   * per-op timing on. `true` takes the defaults. python-ort, node-ort and native; ignored by python-torch.
   */
  profile?: boolean | { batch?: number; iterations?: number };
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
  /** The (first) float32 input, batch first; empty when the model's first input is not float32. */
  inputs: Float32Array;
  /** null for generated inputs (zoo models). */
  labels: BigInt64Array | null;
  /** [n, ...sample shape] of `inputs` */
  shape: number[];
  /**
   * An existing ONNX model's eval set: every graph input (its dtype, batch first) and the
   * IoSpecs of its inputs and outputs; benchmarks send them in the multi-input form.
   */
  model?: EvalSet;
  /**
   * A trained model's held-out inputs when they are not float32 (tiny-gpt: int64 [n, 64]),
   * batch first; the export stage turns them into `model` once the graph's input is known.
   */
  raw?: Tensor;
}

/** One graph output of a runtime over the eval set, batch first. */
export interface OutputTensor {
  name: string;
  dtype: DType;
  shape: number[];
  data: TensorData;
}

export interface BenchmarkResult {
  runtime: string;
  available: true;
  pid: number;
  device: string;
  latencyMs: LatencyTable;
  throughputPerS: number;
  /** The first output as float32 (what accuracy reads). */
  outputs: Float32Array;
  outputShape: number[];
  /** Every graph output, in graph order (one named "outputs" on the single-tensor path). */
  outputSet: OutputTensor[];
  accuracy: number | null;
  /** The worst of the per-output diffs. */
  maxAbsDiff: number | null;
  /** Max abs diff of each output against the reference's, by output name; null for the reference. */
  outputDiffs: Record<string, number | null> | null;
  /** Native only: arena bytes per sample vs the lower bound, from the compiler. */
  plan?: { path: string; arenaBytesPerSample: number; lowerBoundPerSample: number };
}

/** A benchmark whose runtime is missing (memlane-rt not built...): reported, not failed. */
export interface UnavailableRuntime {
  runtime: string;
  available: false;
  /** "unavailable": could not start (no binary, an op memlane-rt lacks); "failed": an `optional` runtime that failed. */
  status?: "unavailable" | "failed";
  reason: string;
  /** Protocol error code recorded on the skipped stage (default BACKEND_UNAVAILABLE; UNSUPPORTED_OP for an op the compiler lacks). */
  code?: number;
}

/** What every stage definition has; `retries` is resolved (the kind's default applied). */
interface StageDefCommon {
  name: string;
  after: string[];
  exclusive: boolean;
  retries: number;
}

export type StageDef =
  | (StageDefCommon & { kind: "train"; opts: Readonly<TrainOptions> })
  | (StageDefCommon & { kind: "export"; opts: Readonly<ExportOptions> })
  | (StageDefCommon & { kind: "benchmark"; runtime: Runtime; opts: Readonly<BenchmarkOptions> })
  | (StageDefCommon & { kind: "checkpoint-load"; opts: Readonly<CheckpointLoadOptions> })
  | (StageDefCommon & { kind: "python"; fn: PythonStageFn });

/** The train tasks' batch size when a stage sets none (python/memlane_worker/tasks/train.py, train_gpt.py). */
export const DEFAULT_TRAIN_BATCH_SIZE = 32;
