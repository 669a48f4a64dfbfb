/**
 * memlane's public surface: script train → export → deploy pipelines in TypeScript and see
 * where host RAM and GPU memory go, per process and per phase.
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
 */

// Pipelines: the builder, options and stage types, and running one.
export { pipeline, Pipeline } from "./pipeline/builder.ts";
export { PIPELINE_DEFAULTS, OptionError } from "./pipeline/options.ts";
export type { PipelineOptions, ResolvedPipelineOptions } from "./pipeline/options.ts";
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
} from "./pipeline/stages.ts";
export { runPipeline } from "./pipeline/run.ts";
export type { RunPipelineOptions, RunOutcome } from "./pipeline/run.ts";
export type { PyBridge } from "./workers/python-bridge.ts";
