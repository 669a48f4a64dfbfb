export { Pipeline, pipeline } from "./builder.ts";
export { OptionError, PIPELINE_DEFAULTS, resolvePipelineOptions } from "./options.ts";
export type { PipelineOptions, ResolvedPipelineOptions } from "./options.ts";
export { PipelineDefinitionError, runDag, StageError, validateDag } from "./scheduler.ts";
export type { DagNode, DagOptions } from "./scheduler.ts";
export * from "./stages.ts";
