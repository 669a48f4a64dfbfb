/**
 * The orchestrator's memory sampler: reads /proc (and optionally a GPU probe) for a set of
 * tracked pids at a fixed period, keeping a bounded, decimating ring of samples per process.
 * Timestamps are wall clock (Date.now) so they line up with workers' phase marks on the same
 * host. A tick starts only after the previous one finished: slow reads delay the next tick,
 * they never pile up.
 *
 * Every tick reads each process's `status` (VmRSS, VmHWM: a few counters). `smaps_rollup`
 * (PSS, USS, swap) is a walk of the process's page tables, ~25 us per MiB resident on a
 * 2-core KVM guest (1.1 ms for a 70 MiB memlane-rt worker, 7.5 ms for a 300 MiB Python one):
 * read at 20 Hz for the orchestrator and its workers it took 10-15 % of a core, and at 2
 * threads on 2 cores it slowed both runtimes' resnet18 p50 by about 28 %. So a process's rollup
 * is read at most as often as keeps its cost under `rollupBudget` of one CPU (default 0.5 %),
 * and never less often than the tick where it is cheap; samples between rollups carry RSS and
 * HWM only. Peaks do not depend on it (VmHWM is read every tick); the workers' own marks read
 * their rollup at every phase boundary. See docs/memory.md.
 */
import { readProcessMemory, readStatusMemorySync, type HostReading, type StatusMemory } from "./proc.ts";

/**
 * Per-process GPU memory, provided by the caller (the NVML probe in src/memory/gpu*.ts).
 * `processUsedBytes` returns the bytes the process holds on the GPU(s) (0 for a process
 * with no GPU context while NVML answers), or null when it cannot tell.
 */
export interface GpuProbe {
  processUsedBytes(pid: number): number | null;
  available(): { ok: boolean; reason?: string };
}

export interface Sample {
  /** Wall clock, ms since the epoch, taken just before the reads. */
  tMs: number;
  /** Resident KiB: smaps_rollup's Rss on a tick that read it, else status's VmRSS. */
  rssKiB: number;
  /** VmHWM, never below rssKiB. */
  hwmKiB: number;
  /** smaps_rollup's figures; null on a tick that read only status (see the rollup budget above). */
  pssKiB: number | null;
  ussKiB: number | null;
  swapKiB: number | null;
  /** GPU memory of the process in KiB; null when GPU is unavailable or unknown. */
  gpuKiB: number | null;
}

export interface SamplerOptions {
  /** Sampling period in ms (≥ 20 Hz required by the design: at most 50). Default 50. */
  periodMs?: number;
  /** Samples kept per process before decimation halves them. Default 8192 (~7 min at 50 ms). */
  capacity?: number;
  /** GPU probe; without one every GPU figure is null and gpuStatus() says why. */
  gpu?: GpuProbe;
  /**
   * Share of one CPU a process's smaps_rollup reads may take, in (0, 1]: after a read that
   * took c ms, the next comes no sooner than c / rollupBudget ms (nor sooner than the next
   * tick). Default 0.005; 1 reads it every tick.
   */
  rollupBudget?: number;
  /** Full host reader (smaps_rollup + status); default readProcessMemory (/proc). Tests inject scripted readings. */
  read?: (pid: number) => Promise<HostReading | null>;
  /** Every-tick reader (status); default readStatusMemorySync. Null: the process is gone. */
  readStatus?: (pid: number) => StatusMemory | null;
}

export interface ResolvedSamplerOptions {
  readonly periodMs: number;
  readonly capacity: number;
  readonly rollupBudget: number;
}

export const SAMPLER_DEFAULTS: ResolvedSamplerOptions = Object.freeze({ periodMs: 50, capacity: 8192, rollupBudget: 0.005 });

export interface TrackedProcess {
  label: string;
  pid: number;
  /** Effective sampling period: periodMs × 2^(number of decimations). */
  periodMs: number;
  /** True once a read found the process gone; it is no longer sampled. */
  exited: boolean;
  samples: Sample[];
}

function resolve(options: SamplerOptions): ResolvedSamplerOptions {
  const periodMs = options.periodMs ?? SAMPLER_DEFAULTS.periodMs;
  const capacity = options.capacity ?? SAMPLER_DEFAULTS.capacity;
  const rollupBudget = options.rollupBudget ?? SAMPLER_DEFAULTS.rollupBudget;
  if (!Number.isFinite(periodMs) || periodMs <= 0 || periodMs > 50)
    throw new RangeError(`SamplerOptions.periodMs: expected a period in (0, 50] ms (>= 20 Hz), received ${String(periodMs)}`);
  if (!Number.isInteger(capacity) || capacity < 16)
    throw new RangeError(`SamplerOptions.capacity: expected an integer >= 16, received ${String(capacity)}`);
  if (!Number.isFinite(rollupBudget) || rollupBudget <= 0 || rollupBudget > 1)
    throw new RangeError(`SamplerOptions.rollupBudget: expected a share of one CPU in (0, 1], received ${String(rollupBudget)}`);
  return Object.freeze({ periodMs, capacity, rollupBudget });
}

interface Track extends TrackedProcess {
  /** Keep one sample of every `stride` ticks (after decimation); `skipped` counts towards it. */
  stride: number;
  pending: Sample | null;
  skipped: number;
  /** performance.now() from which the next smaps_rollup may be read. */
  rollupDue: number;
}

/** Whether decimation keeps `s` over `kept`: the higher RSS, or on a tie the one with a rollup. */
const keepOver = (s: Sample, kept: Sample): boolean =>
  s.rssKiB > kept.rssKiB || (s.rssKiB === kept.rssKiB && s.ussKiB !== null && kept.ussKiB === null);

export class MemorySampler {
  readonly options: ResolvedSamplerOptions;
  private readonly gpu: GpuProbe | undefined;
  private readonly read: (pid: number) => Promise<HostReading | null>;
  private readonly readStatus: (pid: number) => StatusMemory | null;
  private readonly tracks = new Map<number, Track>();
  private readonly listeners = new Set<(pid: number, s: Sample) => void>();
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  /** Bumped by start/stop: a tick of an older loop does not reschedule itself. */
  private loop = 0;
  private inFlight: Promise<void> | null = null;
  private gpuState: { ok: boolean; reason?: string } | null = null;

  constructor(options: SamplerOptions = {}) {
    this.options = resolve(options);
    this.gpu = options.gpu;
    this.read = options.read ?? readProcessMemory;
    this.readStatus = options.readStatus ?? readStatusMemorySync;
  }

  /** Starts sampling (idempotent). The timer is unref'd: it never keeps Node alive. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const loop = ++this.loop;
    // A tick of the previous loop still in flight finishes first; this loop starts after it.
    if (this.inFlight) void this.inFlight.then(() => this.schedule(0, loop));
    else this.schedule(0, loop);
  }

  /** Stops sampling after the tick in flight, if any, completes. */
  async stop(): Promise<void> {
    this.running = false;
    this.loop++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.inFlight;
  }

  /** Starts tracking a pid under a label (a runtime or stage name). Re-tracking relabels it. */
  track(pid: number, label: string): void {
    const t = this.tracks.get(pid);
    if (t) {
      t.label = label;
      t.exited = false;
      return;
    }
    this.tracks.set(pid, {
      label, pid, periodMs: this.options.periodMs, exited: false, samples: [], stride: 1, pending: null, skipped: 0, rollupDue: 0,
    });
  }

  /** Stops sampling a pid (marked exited); its samples stay available unless `forget` is true. */
  untrack(pid: number, forget = false): void {
    const t = this.tracks.get(pid);
    if (!t) return;
    if (forget) this.tracks.delete(pid);
    else t.exited = true;
  }

  /** Calls fn on every new sample; returns the unsubscribe function. */
  onSample(fn: (pid: number, s: Sample) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Whether GPU figures are measured and, if not, why. */
  gpuStatus(): { ok: boolean; reason?: string } {
    if (!this.gpu) return { ok: false, reason: "no GPU probe configured" };
    if (this.gpuState === null) {
      try {
        this.gpuState = this.gpu.available();
      } catch (err) {
        this.gpuState = { ok: false, reason: `GPU probe failed: ${(err as Error).message}` };
      }
    }
    return this.gpuState;
  }

  /** Samples of a pid (oldest first), optionally only those with start ≤ tMs ≤ end. */
  samples(pid: number, startMs = -Infinity, endMs = Infinity): Sample[] {
    const t = this.tracks.get(pid);
    if (!t) return [];
    return t.samples.filter((s) => s.tMs >= startMs && s.tMs <= endMs);
  }

  /** A copy of every track (for the report's timeline). */
  snapshot(): TrackedProcess[] {
    return [...this.tracks.values()].map((t) => ({
      label: t.label, pid: t.pid, periodMs: t.periodMs, exited: t.exited, samples: [...t.samples],
    }));
  }

  /** Takes one sample of every live tracked pid now (also used by tests). */
  async sampleOnce(): Promise<void> {
    const live = [...this.tracks.values()].filter((t) => !t.exited);
    const gpuOk = this.gpuStatus().ok;
    await Promise.all(live.map((t) => this.sampleTrack(t, gpuOk)));
  }

  private async sampleTrack(t: Track, gpuOk: boolean): Promise<void> {
    const tMs = Date.now();
    const began = performance.now();
    let host: Omit<Sample, "tMs" | "gpuKiB"> | null = null;
    // Half a period early still counts as due: the next tick is scheduled a period after this
    // one began, and timers fire a little early or late.
    if (began >= t.rollupDue - this.options.periodMs / 2) {
      let full: HostReading | null = null;
      try {
        full = await this.read(t.pid);
      } catch {
        full = null;
      }
      host = full;
      t.rollupDue = began + (performance.now() - began) / this.options.rollupBudget;
    } else {
      let st: StatusMemory | null = null;
      try {
        st = this.readStatus(t.pid);
      } catch {
        st = null;
      }
      host = st === null ? null : { rssKiB: st.vmRssKiB, hwmKiB: Math.max(st.hwmKiB, st.vmRssKiB), pssKiB: null, ussKiB: null, swapKiB: null };
    }
    if (host === null) {
      t.exited = true;
      return;
    }
    let gpuKiB: number | null = null;
    if (gpuOk && this.gpu) {
      try {
        const bytes = this.gpu.processUsedBytes(t.pid);
        gpuKiB = bytes === null ? null : bytes / 1024;
      } catch {
        gpuKiB = null;
      }
    }
    const s: Sample = { tMs, ...host, gpuKiB };
    this.store(t, s);
    for (const fn of this.listeners) {
      try {
        fn(t.pid, s);
      } catch {
        // A listener's bug must not stop sampling.
      }
    }
  }

  /**
   * Appends with decimation: once the ring is full, adjacent pairs merge (keeping the one
   * with the higher RSS, so peaks survive) and the stride doubles; later ticks then fold
   * `stride` raw samples into one, again keeping the highest RSS (a sample with a rollup on
   * a tie, so a long run's USS line thins out rather than vanishing).
   */
  private store(t: Track, s: Sample): void {
    if (t.pending === null || keepOver(s, t.pending)) t.pending = s;
    t.skipped++;
    if (t.skipped < t.stride) return;
    t.samples.push(t.pending);
    t.pending = null;
    t.skipped = 0;
    if (t.samples.length < this.options.capacity) return;
    const merged: Sample[] = [];
    for (let i = 0; i < t.samples.length; i += 2) {
      const a = t.samples[i]!;
      const b = t.samples[i + 1];
      merged.push(b !== undefined && keepOver(b, a) ? b : a);
    }
    t.samples = merged;
    t.stride *= 2;
    t.periodMs = this.options.periodMs * t.stride;
  }

  private schedule(delayMs: number, loop: number): void {
    if (!this.running || loop !== this.loop) return;
    this.timer = setTimeout(() => this.tick(loop), delayMs);
    this.timer.unref();
  }

  private tick(loop: number): void {
    this.timer = null;
    const began = Date.now();
    this.inFlight = this.sampleOnce().finally(() => {
      this.inFlight = null;
      const spent = Date.now() - began;
      this.schedule(Math.max(0, this.options.periodMs - spent), loop);
    });
  }
}
