/**
 * Phase accounting: a process's phase marks (start/end, each with its own /proc/self
 * reading, VmHWM reset at the start) combined with the orchestrator's samples of that pid.
 *
 * - reading: the end mark's reading;
 * - increment: end − start, per counter;
 * - peak: max(end VmHWM, highest sampled RSS within [start, end], end RSS).
 *
 * Also `PhaseRecorder`, which measures phases of the calling process itself (a library
 * user's own code) the way a worker does. See docs/memory.md.
 */
import type { MemoryReading, PhaseName, SmapsSummary } from "../transport/protocol.ts";
import { readProcessMemory, resetPeak } from "./proc.ts";
import { decodeSmapsSummary, readSmaps } from "./smaps.ts";
import type { Sample } from "./sampler.ts";

/** The part of a protocol `phase` message that phase accounting needs. */
export interface PhaseMarkInput {
  name: PhaseName | string;
  mark: "start" | "end";
  tMs: number;
  memory: MemoryReading;
  /** Per-mapping summary (every end mark, and a task's first mark); untrusted until decoded. */
  smaps?: SmapsSummary | unknown;
}

/** The per-mapping summaries of one phase (docs/memory.md, "Where the RAM goes"). */
export interface PhaseSmaps {
  /** At the phase end; null when the end mark carried none (an older worker). */
  end: SmapsSummary | null;
  /**
   * What the phase's growth is measured from: its own start mark's summary, else the latest
   * one taken before its start (the previous phase's end); null when there is none.
   */
  base: SmapsSummary | null;
  baseFrom: "start" | "earlier-mark" | null;
  /** Why a summary could not be used (malformed), naming the mark; absent when fine. */
  problem?: string;
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
  smaps: PhaseSmaps;
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
export function phaseFigures(
  start: PhaseMarkInput,
  end: PhaseMarkInput,
  samples: readonly Sample[],
  smaps: PhaseSmaps = { end: null, base: null, baseFrom: null },
): PhaseFigures {
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
    smaps,
  };
}

/** A mark's summary, checked; null when it has none; throws naming the mark when malformed. */
function markSmaps(m: PhaseMarkInput): SmapsSummary | null {
  return m.smaps === undefined || m.smaps === null ? null : decodeSmapsSummary(m.smaps, `phase ${m.name} ${m.mark} mark: smaps`);
}

/**
 * Pairs marks by name in order (an `end` closes the latest open `start` of that name) and
 * returns one PhaseFigures per completed phase, ordered by start time. A start without an
 * end (the process died inside the phase) yields nothing: there is no end reading.
 */
export function combinePhases(marks: readonly PhaseMarkInput[], samples: readonly Sample[]): PhaseFigures[] {
  const open = new Map<string, Array<{ mark: PhaseMarkInput; base: PhaseSmaps["base"]; baseFrom: PhaseSmaps["baseFrom"]; problem?: string }>>();
  const out: PhaseFigures[] = [];
  let latest: SmapsSummary | null = null; // the last summary seen, in arrival order
  for (const m of marks) {
    let own: SmapsSummary | null = null;
    let problem: string | undefined;
    try {
      own = markSmaps(m);
    } catch (err) {
      problem = (err as Error).message;
    }
    const stack = open.get(m.name) ?? [];
    if (m.mark === "start") {
      const base = own ?? latest;
      stack.push({ mark: m, base, baseFrom: own ? "start" : latest ? "earlier-mark" : null, ...(problem ? { problem } : {}) });
      open.set(m.name, stack);
    } else {
      const start = stack.pop();
      if (start !== undefined) {
        const why = problem ?? start.problem;
        out.push(phaseFigures(start.mark, m, samples, { end: own, base: start.base, baseFrom: start.baseFrom, ...(why ? { problem: why } : {}) }));
      }
    }
    if (own) latest = own;
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
 * sends (the per-mapping summary at every end and at the first start included). Phases must
 * not overlap: VmHWM is per process, and each start resets it.
 */
export class PhaseRecorder {
  readonly marks: PhaseMarkInput[] = [];
  private active: string | null = null;

  async begin(name: PhaseName | string): Promise<void> {
    if (this.active !== null)
      throw new Error(`PhaseRecorder: phase "${name}" started while "${this.active}" is open; phases of one process cannot overlap`);
    this.active = name;
    await resetPeak("self");
    const tMs = Date.now();
    const memory = await selfReading();
    const smaps = this.marks.length === 0 ? await readSmaps("self") : null;
    this.marks.push({ name, mark: "start", tMs, memory, ...(smaps ? { smaps } : {}) });
  }

  async end(name: PhaseName | string): Promise<void> {
    if (this.active !== name) throw new Error(`PhaseRecorder: end of "${name}" but the open phase is ${JSON.stringify(this.active)}`);
    const tMs = Date.now();
    const memory = await selfReading();
    const smaps = await readSmaps("self");
    this.marks.push({ name, mark: "end", tMs, memory, ...(smaps ? { smaps } : {}) });
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
