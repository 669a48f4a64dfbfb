/** Host (and GPU) memory measurement: /proc readers, the sampler, phase accounting. See docs/memory.md. */
export {
  kibToMiB, parseSmapsRollup, parseStatus, readProcessMemory, readSmapsRollup, readStatusMemory, resetPeak,
  type HostReading, type SmapsRollup, type StatusMemory,
} from "./proc.ts";
export {
  MemorySampler, SAMPLER_DEFAULTS,
  type GpuProbe, type ResolvedSamplerOptions, type Sample, type SamplerOptions, type TrackedProcess,
} from "./sampler.ts";
export { combinePhases, measurePhase, phaseFigures, PhaseRecorder, type PhaseFigures, type PhaseMarkInput } from "./phases.ts";
