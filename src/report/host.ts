import { cpus, platform, release, totalmem } from "node:os";
import type { HostInfo } from "./schema.ts";

/** This machine, for the report's `host` section. */
export function hostInfo(python: string | null = null): HostInfo {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model.trim() ?? "unknown",
    cores: cpu.length,
    memTotalMiB: Math.round(totalmem() / 2 ** 20),
    platform: platform(),
    kernel: release(),
    node: process.version,
    python,
  };
}
