/**
 * The orchestrator's memory sampler: reads /proc (and optionally a GPU probe) for a set of
 * tracked pids at a fixed period, keeping a bounded, decimating ring of samples per process.
 * Timestamps are wall clock (Date.now) so they line up with workers' phase marks on the same
 * host. A tick starts only after the previous one finished: slow reads delay the next tick,
 * they never pile up. See docs/memory.md.
 */
import { readProcessMemory, type HostReading } from "./proc.ts";

/**
 * Per-process GPU memory, provided by the caller (the NVML probe in src/memory/gpu*.ts).
 * `processUsedBytes` returns the bytes the process holds on the GPU(s) (0 for a process
 * with no GPU context while NVML answers), or null when it cannot tell.
 */
export interface GpuProbe {
  processUsedBytes(pid: number): number | null;
  available(): { ok: boolean; reason?: string };
}

export interface Sample extends HostReading {
  /** Wall clock, ms since the epoch, taken just before the reads. */
  tMs: number;
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
  /** Host reader; default readProcessMemory (/proc). Tests inject scripted readings. */
  read?: (pid: number) => Promise<HostReading | null>;
}

export interface ResolvedSamplerOptions {
  readonly periodMs: number;
  readonly capacity: number;
}

export const SAMPLER_DEFAULTS: ResolvedSamplerOptions = Object.freeze({ periodMs: 50, capacity: 8192 });

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
  if (!Number.isFinite(periodMs) || periodMs <= 0 || periodMs > 50)
    throw new RangeError(`SamplerOptions.periodMs: expected a period in (0, 50] ms (>= 20 Hz), received ${String(periodMs)}`);
  if (!Number.isInteger(capacity) || capacity < 16)
    throw new RangeError(`SamplerOptions.capacity: expected an integer >= 16, received ${String(capacity)}`);
  return Object.freeze({ periodMs, capacity });
}

interface Track extends TrackedProcess {
  /** Keep one sample of every `stride` ticks (after decimation); `skipped` counts towards it. */
  stride: number;
  pending: Sample | null;
  skipped: number;
}

export class MemorySampler {
  readonly options: ResolvedSamplerOptions;
  private readonly gpu: GpuProbe | undefined;
  private readonly read: (pid: number) => Promise<HostReading | null>;
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
      label, pid, periodMs: this.options.periodMs, exited: false, samples: [], stride: 1, pending: null, skipped: 0,
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
    let reading: HostReading | null = null;
    try {
      reading = await this.read(t.pid);
    } catch {
      reading = null;
    }
    if (reading === null) {
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
    const s: Sample = { tMs, ...reading, gpuKiB };
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
   * `stride` raw samples into one, again keeping the highest RSS.
   */
  private store(t: Track, s: Sample): void {
    if (t.pending === null || s.rssKiB > t.pending.rssKiB) t.pending = s;
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
      merged.push(b !== undefined && b.rssKiB > a.rssKiB ? b : a);
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
