/**
 * The CPU's feature flags as Linux lists them (/proc/cpuinfo's first `flags` line): what
 * decides which kernels MLAS and memlane-rt run, and so what an estimate must assume (ORT's
 * NCHWc block, ort-nchwc.ts). Empty where the file cannot be read. Read once.
 */
import { readFileSync } from "node:fs";

/** The flags of a cpuinfo text. */
export function parseCpuFlags(cpuinfo: string): Set<string> {
  return new Set((/^flags\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? "").split(/\s+/).filter(Boolean));
}

let cached: Set<string> | undefined;
export function cpuFlags(): ReadonlySet<string> {
  if (!cached) {
    let text = "";
    try {
      text = readFileSync("/proc/cpuinfo", "utf8");
    } catch {
      // not Linux, or /proc hidden: no flags known
    }
    cached = parseCpuFlags(text);
  }
  return cached;
}
