/**
 * Phase accounting: a process's phase marks (start/end, each with its own /proc/self
 * reading, VmHWM reset at the start) combined with the orchestrator's samples of that pid.
 *
 * - reading: the end mark's reading;
 * - increment: end − start, per counter;
 * - peak: max(end VmHWM, highest sampled RSS within [start, end], end RSS).
 *
 * Also `PhaseRecorder`, which measures phases of the orchestrator's own process (node-ort
 * runs on a worker_thread inside it) the way a worker does. See docs/memory.md.
 */
import type { MemoryReading, PhaseName } from "../transport/protocol.ts";
import { readProcessMemory, resetPeak } from "./proc.ts";
import type { Sample } from "./sampler.ts";

/** The part of a protocol `phase` message that phase accounting needs. */
export interface PhaseMarkInput {
  name: PhaseName | string;
  mark: "start" | "end";
  tMs: number;
  memory: MemoryReading;
}

export interface PhaseFigures {
  name: string;
  startMs: number;
  endMs: number;
  ms: number;
  start: MemoryReading;
  end: MemoryReading;
  deltaRssKiB: number;
  deltaUssKiB: number;
  deltaPssKiB: number;
  peakRssKiB: number;
  peakSource: "hwm" | "sample" | "end";
  /** Samples of the process inside [startMs, endMs]. */
  samples: number;
  /** GPU KiB at start/end (the mark's own figure, else the nearest sample) and the sampled peak; null when unknown. */
  gpuStartKiB: number | null;
  gpuEndKiB: number | null;
  gpuPeakKiB: number | null;
}

/** A sample counts as "at" a mark when it is at most this far away (ms), for GPU figures. */
const GPU_NEAREST_MS = 250;

function nearestGpu(samples: readonly Sample[], tMs: number): number | null {
  let best: Sample | null = null;
  for (const s of samples) {
    if (s.gpuKiB === null || Math.abs(s.tMs - tMs) > GPU_NEAREST_MS) continue;
    if (best === null || Math.abs(s.tMs - tMs) < Math.abs(best.tMs - tMs)) best = s;
  }
  return best?.gpuKiB ?? null;
}

/** Figures of one phase from its two marks and the process's samples (any range). */
export function phaseFigures(start: PhaseMarkInput, end: PhaseMarkInput, samples: readonly Sample[]): PhaseFigures {
  const inside = samples.filter((s) => s.tMs >= start.tMs && s.tMs <= end.tMs);
  const endMem = end.memory;
  let peakRssKiB = endMem.rssKiB;
  let peakSource: PhaseFigures["peakSource"] = "end";
  if (endMem.hwmKiB > peakRssKiB) {
    peakRssKiB = endMem.hwmKiB;
    peakSource = "hwm";
  }
  for (const s of inside) {
    if (s.rssKiB > peakRssKiB) {
      peakRssKiB = s.rssKiB;
      peakSource = "sample";
    }
  }
  const gpuStartKiB = start.memory.gpuKiB ?? nearestGpu(samples, start.tMs);
  const gpuEndKiB = endMem.gpuKiB ?? nearestGpu(samples, end.tMs);
  const gpuKnown = [gpuStartKiB, gpuEndKiB, ...inside.map((s) => s.gpuKiB)].filter((g): g is number => g !== null);
  return {
    name: start.name,
    startMs: start.tMs,
    endMs: end.tMs,
    ms: end.tMs - start.tMs,
    start: start.memory,
    end: endMem,
    deltaRssKiB: endMem.rssKiB - start.memory.rssKiB,
    deltaUssKiB: endMem.ussKiB - start.memory.ussKiB,
    deltaPssKiB: endMem.pssKiB - start.memory.pssKiB,
    peakRssKiB,
    peakSource,
    samples: inside.length,
    gpuStartKiB,
    gpuEndKiB,
    gpuPeakKiB: gpuKnown.length > 0 ? Math.max(...gpuKnown) : null,
  };
}

/**
 * Pairs marks by name in order (an `end` closes the latest open `start` of that name) and
 * returns one PhaseFigures per completed phase, ordered by start time. A start without an
 * end (the process died inside the phase) yields nothing: there is no end reading.
 */
export function combinePhases(marks: readonly PhaseMarkInput[], samples: readonly Sample[]): PhaseFigures[] {
  const open = new Map<string, PhaseMarkInput[]>();
  const out: PhaseFigures[] = [];
  for (const m of marks) {
    const stack = open.get(m.name) ?? [];
    if (m.mark === "start") {
      stack.push(m);
      open.set(m.name, stack);
      continue;
    }
    const start = stack.pop();
    if (start !== undefined) out.push(phaseFigures(start, m, samples));
  }
  return out.sort((a, b) => a.startMs - b.startMs);
}

/** This process's reading now (the orchestrator's /proc/self); throws only if /proc is missing. */
async function selfReading(): Promise<MemoryReading> {
  const r = await readProcessMemory("self");
  if (r === null) throw new Error("cannot read /proc/self/smaps_rollup: memory measurement needs Linux /proc");
  return r;
}

/**
 * Measures phases of the orchestrator's own process, producing the same marks a worker
 * sends. Phases must not overlap: VmHWM is per process, and each start resets it.
 */
export class PhaseRecorder {
  readonly marks: PhaseMarkInput[] = [];
  private active: string | null = null;

  async begin(name: PhaseName | string): Promise<void> {
    if (this.active !== null)
      throw new Error(`PhaseRecorder: phase "${name}" started while "${this.active}" is open; phases of one process cannot overlap`);
    this.active = name;
    await resetPeak("self");
    this.marks.push({ name, mark: "start", tMs: Date.now(), memory: await selfReading() });
  }

  async end(name: PhaseName | string): Promise<void> {
    if (this.active !== name) throw new Error(`PhaseRecorder: end of "${name}" but the open phase is ${JSON.stringify(this.active)}`);
    const memory = await selfReading();
    this.marks.push({ name, mark: "end", tMs: Date.now(), memory });
    this.active = null;
  }

  /** Runs fn as phase `name`; the phase ends (and is recorded) even when fn throws. */
  async measure<T>(name: PhaseName | string, fn: () => T | Promise<T>): Promise<T> {
    await this.begin(name);
    try {
      return await fn();
    } finally {
      await this.end(name);
    }
  }
}

/** One-off form of PhaseRecorder.measure: the value and the phase's two marks. */
export async function measurePhase<T>(
  name: PhaseName | string,
  fn: () => T | Promise<T>,
): Promise<{ value: T; marks: PhaseMarkInput[] }> {
  const rec = new PhaseRecorder();
  const value = await rec.measure(name, fn);
  return { value, marks: rec.marks };
}
