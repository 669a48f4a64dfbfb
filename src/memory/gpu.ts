// GPU memory through NVML (via the addon): device totals and per-process used bytes.
// An absent driver or library reads as unavailable with a reason, never as zero.
import { existsSync } from "node:fs";
import { loadAddon, type NativeGpuDevice, type NativeGpuProbe, type NativeGpuProcess } from "./gpu-addon.ts";

/** What the memory sampler needs: per-process GPU bytes and whether they can be read. */
export interface GpuProbe {
  available(): { ok: boolean; reason?: string };
  /**
   * Bytes of GPU memory the process uses, summed over devices. `null` when NVML is
   * unavailable, when NVML lists the process without an amount, or when the pid cannot be
   * matched (NVML reports pids of another pid namespace, e.g. inside a container).
   * `0` when NVML works, its pids are ours, and the process holds no GPU context.
   */
  processUsedBytes(pid: number): number | null;
  devices(): GpuDevice[];
}

export type GpuDevice = NativeGpuDevice;
export type GpuProcess = NativeGpuProcess;

export interface GpuProbeOptions {
  /** NVML library to open (default libnvidia-ml.so.1); tests point it at a stand-in. */
  library?: string;
  /** Path of memlane.node (default $MEMLANE_ADDON or native/build/addon/memlane.node). */
  addonPath?: string;
  /** How long one NVML process listing is reused, ms (default 20: one sampler tick at 50 Hz). */
  cacheMs?: number;
}

export interface NvmlGpuProbe extends GpuProbe {
  processes(): GpuProcess[];
  /** Driver version and library path, for reports. */
  info(): { library: string; driverVersion?: string; deviceCount?: number };
}

export function createGpuProbe(options: GpuProbeOptions = {}): NvmlGpuProbe {
  const cacheMs = options.cacheMs ?? 20;
  if (!Number.isFinite(cacheMs) || cacheMs < 0) {
    throw new TypeError(`createGpuProbe options.cacheMs: expected a number >= 0, received ${String(options.cacheMs)}`);
  }
  const addon = loadAddon(options.addonPath);
  const native: NativeGpuProbe = new addon.GpuProbe(options.library === undefined ? undefined : { library: options.library });
  const status = native.status();
  let listing: { at: number; procs: GpuProcess[]; foreign: boolean } | undefined;

  const list = () => {
    const now = performance.now();
    if (listing && now - listing.at <= cacheMs) return listing;
    const procs = native.processes();
    // A listed pid absent from our /proc means NVML speaks another pid namespace: then an
    // unlisted pid proves nothing, and reads as unknown rather than 0.
    const foreign = procs.some((p) => !existsSync(`/proc/${p.pid}`));
    listing = { at: now, procs, foreign };
    return listing;
  };

  return {
    available: () => (status.available ? { ok: true } : { ok: false, reason: status.reason ?? "unknown" }),
    info: () => ({ library: status.library, driverVersion: status.driverVersion, deviceCount: status.deviceCount }),
    devices: () => (status.available ? native.devices() : []),
    processes: () => (status.available ? list().procs : []),
    processUsedBytes(pid: number): number | null {
      if (!status.available) return null;
      const { procs, foreign } = list();
      // Per device the larger of a compute and a graphics entry (a C+G process is one context).
      const perDevice = new Map<number, number | null>();
      for (const p of procs) {
        if (p.pid !== pid) continue;
        const prev = perDevice.get(p.device);
        if (prev === undefined) perDevice.set(p.device, p.usedBytes);
        else if (prev !== null && p.usedBytes !== null) perDevice.set(p.device, Math.max(prev, p.usedBytes));
      }
      if (perDevice.size === 0) return foreign ? null : 0;
      let sum = 0;
      for (const b of perDevice.values()) {
        if (b === null) return null;
        sum += b;
      }
      return sum;
    },
  };
}
