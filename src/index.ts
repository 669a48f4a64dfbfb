/**
 * memlane's public surface: script train → export → deploy pipelines in TypeScript and see
 * where host RAM and GPU memory go, per process and per phase. Everything a user needs is
 * re-exported here; modules under src/ are internal.
 *
 * @example
 * ```ts
 * import { pipeline } from "memlane";
 * export default pipeline("digits")
 *   .train({ arch: "digits-cnn", minAccuracy: 0.95 })
 *   .export()
 *   .benchmark("python-ort")
 *   .benchmark("node-ort");
 * ```
 * Run it with `memlane run my-pipeline.ts`, or from code with {@link runPipeline}.
 *
 * @packageDocumentation
 */

// ── Pipelines: the builder, its options and stage types, and running one ──────────────
/** Starts a pipeline definition; a pipeline module default-exports the built pipeline. */
export { pipeline, Pipeline } from "./pipeline/builder.ts";
/** Pipeline options: frozen defaults and the error naming a bad option. */
export { PIPELINE_DEFAULTS, OptionError } from "./pipeline/options.ts";
export type { PipelineOptions, ResolvedPipelineOptions } from "./pipeline/options.ts";
/** A stage failed (`stage`, `cause`), or the stage graph is invalid (cycle, unknown dependency). */
export { StageError, PipelineDefinitionError } from "./pipeline/scheduler.ts";
export { RUNTIMES, CHECKPOINT_METHODS } from "./pipeline/stages.ts";
export type {
  Runtime,
  CheckpointMethod,
  StageCommon,
  TrainOptions,
  ExportOptions,
  BenchmarkOptions,
  OrtSessionOptions,
  CheckpointLoadOptions,
  PythonStageOptions,
  PythonStageFn,
  StageContext,
  HeldOut,
  BenchmarkResult,
  UnavailableRuntime,
  OutputTensor,
} from "./pipeline/stages.ts";
/** The multi-input form of the infer tasks: an ONNX model's inputs and outputs (docs/worker-tasks.md). */
export type { IoSpec, ModelIo, ShapeOverrides } from "./pipeline/inputs/shapes.ts";
export type { EvalSet, EvalInput } from "./pipeline/inputs/eval-set.ts";
/** Runs a pipeline end to end and writes runs/<runId>/report.{json,md,html}. */
export { runPipeline, RUN_DEFAULTS } from "./pipeline/run.ts";
export type { RunPipelineOptions, ResolvedRunPipelineOptions, RunOutcome } from "./pipeline/run.ts";
/** Where a run writes progress: the CLI's terminal, or your own sink. */
export type { Io } from "./cli/io.ts";
/** The bridge a `python` stage receives (pythonia, the project's venv interpreter). */
export type { PyBridge } from "./workers/python-bridge.ts";
/** ONNX Runtime in Node, in a child Node process of its own, measured like the Python worker's infer.ort. */
export { runNodeOrt } from "./workers/node-ort.ts";
export type { NodeOrtTask, NodeOrtResult, NodeOrtPhase } from "./workers/node-ort.ts";

// ── Workers: supervision, the one error type, shutdown ──────────────────────────────────
/** Spawn workers on a loopback broker, run tasks, stop them by escalation. */
export { Supervisor, WorkerHandle, WorkerError, installShutdownHandlers, stopAllWorkers, liveWorkerCount } from "./workers/index.ts";
export type { SupervisorOptions, WorkerErrorInit, WorkerIdentity, ShutdownOptions, WorkerSpec, SpawnOptions, RunOptions, TaskResult, ExitInfo } from "./workers/index.ts";
/** Launch specs of the project's own workers (venv Python worker, memlane-rt). */
export { workerSpecs } from "./workers/specs.ts";

// ── Protocol ────────────────────────────────────────────────────────────────────────────
/** The wire protocol's version, error codes and phase names (docs/protocol.md). */
export { PROTOCOL_VERSION, ErrorCode, errorCodeName, Phase } from "./transport/protocol.ts";
export type { MemoryReading, PhaseName, TensorRef, DType, Message } from "./transport/protocol.ts";
export type { Tensor } from "./transport/codec.ts";

// ── Memory measurement ──────────────────────────────────────────────────────────────────
/** /proc readers, the ≥ 20 Hz sampler, phase accounting (docs/memory.md). */
export { readProcessMemory, MemorySampler, PhaseRecorder, measurePhase, combinePhases } from "./memory/index.ts";
export type { HostReading, Sample, SamplerOptions, TrackedProcess, GpuProbe, PhaseFigures, PhaseMarkInput } from "./memory/index.ts";
/** NVML per-process GPU memory ("unavailable" with a reason, never 0, without a driver). */
export { createGpuProbe } from "./memory/gpu.ts";

// ── Report ──────────────────────────────────────────────────────────────────────────────
/** The report: schema types, builder, renderers and writers (docs/report.md). */
export { REPORT_SCHEMA_VERSION, buildReport, renderMarkdown, renderTerminal, validateReport, writeReport } from "./report/index.ts";
export type { Report, RuntimeReport, PhaseReport, TrainingReport, CheckpointLoadReport, StageReport, StageAttempt, RunRecord } from "./report/index.ts";
export type { OutputReport, RuntimeNotRun, InputReport } from "./report/schema.ts";
/** The per-op profile of a runtime (`compare --profile`, benchmark option `profile`; docs/profiling.md). */
export type { RuntimeProfile, ProfileOp, ProfileOpType } from "./report/profile.ts";
/** The self-contained HTML report of a run directory. */
export { renderHtmlReport, writeHtmlReport } from "./report/html/index.ts";

// ── Compiler ────────────────────────────────────────────────────────────────────────────
/** ONNX → memlane-rt plan (docs/plan-format.md). */
export { compileOnnx, CompileError, PlanError, readPlan } from "./compiler/index.ts";
export type { CompileOptions, CompileSummary, ProfileSummary } from "./compiler/index.ts";
