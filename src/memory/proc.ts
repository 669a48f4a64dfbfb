/**
 * Reading a process's host memory from /proc, in KiB as the kernel reports it.
 *
 * - `/proc/<pid>/smaps_rollup`: Rss, Pss, USS (= Private_Clean + Private_Dirty) and Swap,
 *   summed by the kernel over every mapping (an exact page-table walk).
 * - `/proc/<pid>/status`: VmHWM (the RSS high-water mark since start or since the last
 *   `echo 5 > /proc/<pid>/clear_refs`) and VmRSS.
 *
 * Every reader resolves to null when the process is gone (or vanishes between the two
 * reads); nothing here throws into a sampler loop. See docs/memory.md.
 */
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import type { MemoryReading } from "../transport/protocol.ts";

/** The host part of a MemoryReading (no GPU): what /proc tells about one process. */
export type HostReading = Required<Omit<MemoryReading, "gpuKiB" | "mallocFreeKiB" | "mallocInUseKiB">>;

export interface SmapsRollup {
  rssKiB: number;
  pssKiB: number;
  ussKiB: number;
  swapKiB: number;
}

export interface StatusMemory {
  /** VmRSS: the kernel's RSS counter (may lag smaps_rollup's Rss slightly). */
  vmRssKiB: number;
  /** VmHWM: the highest VmRSS since start or the last clear_refs 5. */
  hwmKiB: number;
}

/** Value in kB of `Key:   123 kB` lines, for the keys asked. Missing keys stay absent. */
function parseKbFields(text: string, keys: readonly string[]): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const key = line.slice(0, colon);
    if (!keys.includes(key)) continue;
    const m = /^\s*(\d+)\s*kB/.exec(line.slice(colon + 1));
    if (m?.[1] !== undefined) found.set(key, Number(m[1]));
  }
  return found;
}

const ROLLUP_KEYS = ["Rss", "Pss", "Private_Clean", "Private_Dirty", "Swap"] as const;

/** Parses smaps_rollup text; null when a required field is missing (not a rollup). */
export function parseSmapsRollup(text: string): SmapsRollup | null {
  const f = parseKbFields(text, ROLLUP_KEYS);
  const rss = f.get("Rss");
  const pss = f.get("Pss");
  const pc = f.get("Private_Clean");
  const pd = f.get("Private_Dirty");
  if (rss === undefined || pss === undefined || pc === undefined || pd === undefined) return null;
  return { rssKiB: rss, pssKiB: pss, ussKiB: pc + pd, swapKiB: f.get("Swap") ?? 0 };
}

/** Parses /proc/<pid>/status; null when VmRSS/VmHWM are absent (a zombie or kernel thread). */
export function parseStatus(text: string): StatusMemory | null {
  const f = parseKbFields(text, ["VmRSS", "VmHWM"]);
  const vmRss = f.get("VmRSS");
  const hwm = f.get("VmHWM");
  if (vmRss === undefined || hwm === undefined) return null;
  return { vmRssKiB: vmRss, hwmKiB: hwm };
}

const procPath = (pid: number | "self", file: string): string => `/proc/${pid}/${file}`;

async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch {
    // ENOENT / ESRCH: the process exited; EACCES: not ours. Either way: no reading.
    return null;
  }
}

export async function readSmapsRollup(pid: number | "self"): Promise<SmapsRollup | null> {
  const text = await readText(procPath(pid, "smaps_rollup"));
  return text === null ? null : parseSmapsRollup(text);
}

export async function readStatusMemory(pid: number | "self"): Promise<StatusMemory | null> {
  const text = await readText(procPath(pid, "status"));
  return text === null ? null : parseStatus(text);
}

/**
 * VmRSS and VmHWM read synchronously, on the calling thread: the sampler's every-tick reading.
 * status is a few counters (~40 us), where an async read would wake libuv's pool for its
 * open, fstat, reads and close: on a machine whose every core runs a benchmark's threads, each
 * wake-up takes a core from one of them.
 */
export function readStatusMemorySync(pid: number | "self"): StatusMemory | null {
  try {
    return parseStatus(readFileSync(procPath(pid, "status"), "utf8"));
  } catch {
    return null;
  }
}

/**
 * One full host reading of a process: smaps_rollup + VmHWM. Null when the process is gone
 * or either file could not be read. HWM is never below the RSS read with it (the two files
 * are read a moment apart; the kernel's counter can lag the page walk).
 */
export async function readProcessMemory(pid: number | "self"): Promise<HostReading | null> {
  const [rollup, status] = await Promise.all([readSmapsRollup(pid), readStatusMemory(pid)]);
  if (rollup === null || status === null) return null;
  return { ...rollup, hwmKiB: Math.max(status.hwmKiB, rollup.rssKiB) };
}

/**
 * Resets VmHWM of a process to its current RSS (`echo 5 > /proc/<pid>/clear_refs`), so that
 * VmHWM read later is the peak since now. Resolves false when the kernel refuses (not our
 * process, or the process is gone); callers then fall back to sampled peaks.
 */
export async function resetPeak(pid: number | "self"): Promise<boolean> {
  try {
    await writeFile(procPath(pid, "clear_refs"), "5");
    return true;
  } catch {
    return false;
  }
}

export const kibToMiB = (kib: number): number => kib / 1024;
