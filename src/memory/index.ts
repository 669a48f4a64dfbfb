/** Host (and GPU) memory measurement: /proc readers, the sampler, phase accounting, the per-mapping breakdown. See docs/memory.md. */
export {
  kibToMiB, parseSmapsRollup, parseStatus, readProcessMemory, readSmapsRollup, readStatusMemory, readStatusMemorySync, resetPeak,
  type HostReading, type SmapsRollup, type StatusMemory,
} from "./proc.ts";
export {
  MemorySampler, SAMPLER_DEFAULTS,
  type GpuProbe, type ResolvedSamplerOptions, type Sample, type SamplerOptions, type TrackedProcess,
} from "./sampler.ts";
export { combinePhases, measurePhase, phaseFigures, PhaseRecorder, type PhaseFigures, type PhaseMarkInput } from "./phases.ts";
export { ANON, ANON_ARENA, ANON_GUARDED, decodeSmapsSummary, parseSmaps, readSmaps, sumSmaps } from "./smaps.ts";
export { classifyMapping, kindLabel, type MappingClass, type MappingKind } from "./mapping-kinds.ts";
export { groupByKind, growthByKind, totalOf, type KindCounts, type KindFile, type KindGrowth, type KindTotals } from "./breakdown.ts";
