/** The run report: schema, builder, renderers and writer. See docs/report.md. */
export * from "./schema.ts";
export {
  buildReport, gpuReport, toMiB,
  type CheckpointLoadRecord, type RunRecord, type RuntimeRecord, type TrainingRecord,
} from "./build.ts";
export { buildComparison, isPythonRuntime, ratio, RATIO_COUNTERS } from "./comparison.ts";
export { hostInfo } from "./host.ts";
export { renderMarkdown } from "./markdown.ts";
export { renderTerminal, type TerminalOptions } from "./terminal.ts";
export { validateReport } from "./validate.ts";
export { stringifyReport, writeFileAtomic, writeReport, type WrittenReport } from "./write.ts";
