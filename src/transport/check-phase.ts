/**
 * What a `phase` mark must hold before its figures reach a report: a worker is trusted no
 * more than its messages. A NaN, a negative or a string where a KiB count belongs would
 * otherwise land in report.json as a measured figure (or as a delta against one).
 */
import type { MemoryReading } from "./protocol.ts";

/** Counters every reading carries (protocol.ts MemoryReading). */
const REQUIRED: ReadonlyArray<keyof MemoryReading> = ["rssKiB", "pssKiB", "ussKiB", "swapKiB", "hwmKiB"];
/** Counters a reading carries where the process can read them, absent elsewhere. */
const OPTIONAL: ReadonlyArray<keyof MemoryReading> = ["gpuKiB", "mallocFreeKiB", "mallocInUseKiB"];
/** Longer than any phase name memlane gives (`checkpoint-load-safetensors`, `epoch-<n>`). */
const MAX_NAME = 128;

const isCount = (x: unknown): boolean => typeof x === "number" && Number.isFinite(x) && x >= 0;
/** A value as the refusal names it (JSON would print NaN and Infinity as null). */
const shown = (x: unknown): string => (typeof x === "number" ? String(x) : JSON.stringify(x) ?? "nothing");

/** Returns what is wrong with a phase mark's fields, or undefined. */
export function checkPhaseMark(env: Record<string, unknown>): string | undefined {
  if (typeof env.name !== "string" || env.name.length === 0 || env.name.length > MAX_NAME)
    return `phase mark: \`name\` must be a string of 1 to ${MAX_NAME} characters`;
  if (env.mark !== "start" && env.mark !== "end") return `phase mark "${env.name}": \`mark\` must be "start" or "end"`;
  if (typeof env.tMs !== "number" || !Number.isFinite(env.tMs)) return `phase mark "${env.name}": \`tMs\` must be a finite number`;
  const m = env.memory;
  if (m === null || typeof m !== "object" || Array.isArray(m)) return `phase mark "${env.name}": \`memory\` must be a map`;
  const reading = m as Record<string, unknown>;
  for (const k of REQUIRED)
    if (!isCount(reading[k])) return `phase mark "${env.name}": memory.${k} must be a finite number >= 0, got ${shown(reading[k])}`;
  for (const k of OPTIONAL)
    if (reading[k] !== undefined && !isCount(reading[k])) return `phase mark "${env.name}": memory.${k} must be absent or a finite number >= 0, got ${shown(reading[k])}`;
  return undefined;
}
