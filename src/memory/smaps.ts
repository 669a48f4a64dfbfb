/**
 * /proc/<pid>/smaps summed per path: the per-mapping half of "where the RAM goes"
 * (docs/memory.md). Workers build the same summary of their own /proc/self/smaps at each
 * phase end (python/memlane_worker/memory.py, native/runtime/src/rt/proc_memory.cc) and send
 * it in the phase message; this module builds it for the orchestrator's own process (node-ort
 * runs on its worker_thread) and for tests, and checks summaries that arrive from workers.
 *
 * Reading smaps costs a walk of every mapping (a torch worker: ~360 mappings, 10-40 ms; docs/memory.md has measurements):
 * phase ends only, never in the 20 Hz sampler, which reads smaps_rollup.
 */
import { readFile } from "node:fs/promises";
import { SMAPS_FIELDS, type SmapsCounts, type SmapsSummary } from "../transport/protocol.ts";

/** Pseudo-names of mappings that have no path (the same strings in Python and C++). */
export const ANON = "[anon]";
/** A writable nameless mapping right above an inaccessible one of at most GUARD_MAX_KIB: a pthread stack over its guard. */
export const ANON_GUARDED = "[anon guarded]";
const GUARD_MAX_KIB = 64;

const FIELD_INDEX = new Map<string, number>(SMAPS_FIELDS.map((k, i) => [k, i]));
const HEADER = /^([0-9a-f]+)-([0-9a-f]+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s*(.*)$/;

const zero = (): SmapsCounts => [0, 0, 0, 0, 0, 0];

/** Parses smaps text into a per-path summary; throws naming the line when it is not smaps. */
export function parseSmaps(text: string): SmapsSummary {
  const out: SmapsSummary = {};
  let counts: SmapsCounts | null = null;
  let prevEnd = -1;
  let prevGuard = false;
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!;
    if (line === "") continue;
    const c = line.charCodeAt(0);
    const hex = (c >= 48 && c <= 57) || (c >= 97 && c <= 102);
    if (hex) {
      const m = HEADER.exec(line);
      if (!m) throw new Error(`smaps line ${n + 1}: expected a mapping header "start-end perms offset dev inode [path]", received ${JSON.stringify(line.slice(0, 80))}`);
      const lo = parseInt(m[1]!, 16);
      const hi = parseInt(m[2]!, 16);
      const perms = m[3]!;
      let name = m[4]!.trimEnd();
      if (name === "") {
        const guarded = prevGuard && prevEnd === lo && perms.startsWith("rw");
        prevGuard = perms.startsWith("---") && (hi - lo) / 1024 <= GUARD_MAX_KIB;
        name = guarded ? ANON_GUARDED : ANON;
      } else {
        prevGuard = false;
      }
      prevEnd = hi;
      counts = out[name] ??= zero();
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const i = FIELD_INDEX.get(line.slice(0, colon));
    if (i === undefined) continue;
    if (counts === null) throw new Error(`smaps line ${n + 1}: a ${line.slice(0, colon)} field before any mapping header`);
    counts[i]! += parseInt(line.slice(colon + 1), 10) || 0;
  }
  return out;
}

/** The summary of a process's smaps now; null when it is gone or not ours. */
export async function readSmaps(pid: number | "self"): Promise<SmapsSummary | null> {
  try {
    return parseSmaps(await readFile(`/proc/${pid}/smaps`, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== undefined) return null; // ENOENT/ESRCH/EACCES: no reading
    throw err;
  }
}

/** Counters summed over every path of a summary (comparable with smaps_rollup). */
export function sumSmaps(summary: SmapsSummary): SmapsCounts {
  const total = zero();
  for (const counts of Object.values(summary)) for (let i = 0; i < total.length; i++) total[i]! += counts[i]!;
  return total;
}

/**
 * Checks a summary that arrived in a phase message (untrusted): a map of path → 6
 * non-negative integers. Throws naming the entry, what was expected and what was received.
 */
export function decodeSmapsSummary(value: unknown, where: string): SmapsSummary {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new Error(`${where}: expected a map of path -> [${SMAPS_FIELDS.join(", ")}] KiB, received ${Array.isArray(value) ? "an array" : typeof value}`);
  const out: SmapsSummary = {};
  for (const [path, counts] of Object.entries(value as Record<string, unknown>)) {
    const ok = Array.isArray(counts) && counts.length === SMAPS_FIELDS.length &&
      counts.every((x) => typeof x === "number" && Number.isInteger(x) && x >= 0);
    if (!ok) throw new Error(`${where}[${JSON.stringify(path)}]: expected ${SMAPS_FIELDS.length} non-negative integers (${SMAPS_FIELDS.join(", ")} KiB), received ${JSON.stringify(counts)}`);
    out[path] = counts as SmapsCounts;
  }
  return out;
}
