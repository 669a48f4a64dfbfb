/**
 * /proc/<pid>/smaps summed per path: the per-mapping half of "where the RAM goes"
 * (docs/memory.md). Workers build the same summary of their own /proc/self/smaps at each
 * phase end (python/memlane_worker/memory.py, native/runtime/src/rt/proc_memory.cc) and send
 * it in the phase message (node-ort's child sends its raw smaps text, parsed here); this
 * module builds it for the calling process (PhaseRecorder) and for tests, and checks
 * summaries that arrive from workers.
 *
 * Reading smaps costs a walk of every mapping (a torch worker: ~360 mappings, 10-40 ms; docs/memory.md has measurements):
 * phase ends only, never in the 20 Hz sampler, which reads smaps_rollup.
 */
import { readFile } from "node:fs/promises";
import { SMAPS_FIELDS, type SmapsCounts, type SmapsSummary } from "../transport/protocol.ts";

/**
 * Pseudo-names of mappings that have no path (the same strings and rules in Python and C++):
 * a writable one right above an inaccessible one of at most GUARD_MAX bytes is laid out like a
 * pthread stack over its guard page; a writable one that starts on an ARENA boundary and fills
 * those 64 MiB (alone, or with an inaccessible rest right after it) like a glibc malloc arena of
 * a thread other than the main one; any other is plain anonymous memory.
 */
export const ANON = "[anon]";
export const ANON_GUARDED = "[anon guarded]";
export const ANON_ARENA = "[anon arena]";
const GUARD_MAX = 64 * 1024;
/** glibc's HEAP_MAX_SIZE on 64-bit: every non-main arena's heap is this size and aligned to it. */
const ARENA = 64 * 1024 * 1024;

interface Mapping {
  lo: number;
  hi: number;
  perms: string;
  path: string;
}

function anonName(m: Mapping, before: Mapping | null, after: Mapping | null): string {
  if (!m.perms.startsWith("rw")) return ANON;
  if (before && before.path === "" && before.perms.startsWith("---") && before.hi === m.lo && before.hi - before.lo <= GUARD_MAX) return ANON_GUARDED;
  const fills = m.hi - m.lo === ARENA ||
    (after !== null && after.path === "" && after.perms.startsWith("---") && after.lo === m.hi && after.hi === m.lo + ARENA);
  if (m.lo % ARENA === 0 && fills) return ANON_ARENA;
  return ANON;
}

const FIELD_INDEX = new Map<string, number>(SMAPS_FIELDS.map((k, i) => [k, i]));
const HEADER = /^([0-9a-f]+)-([0-9a-f]+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s*(.*)$/;

const zero = (): SmapsCounts => [0, 0, 0, 0, 0, 0];

/** Parses smaps text into a per-path summary; throws naming the line when it is not smaps. */
export function parseSmaps(text: string): SmapsSummary {
  const out: SmapsSummary = {};
  // A mapping's name is settled when the next header is seen: a pseudo-name depends on both neighbours.
  let before: Mapping | null = null;
  let current: Mapping | null = null;
  let counts = zero();
  const settle = (after: Mapping | null): void => {
    const name = current!.path !== "" ? current!.path : anonName(current!, before, after);
    const into = (out[name] ??= zero());
    for (let i = 0; i < into.length; i++) into[i]! += counts[i]!;
  };
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!;
    if (line === "") continue;
    const c = line.charCodeAt(0);
    const hex = (c >= 48 && c <= 57) || (c >= 97 && c <= 102);
    if (hex) {
      const m = HEADER.exec(line);
      if (!m) throw new Error(`smaps line ${n + 1}: expected a mapping header "start-end perms offset dev inode [path]", received ${JSON.stringify(line.slice(0, 80))}`);
      // User-space addresses are below 2^47 (2^56 with 5-level paging): exact as numbers below
      // 2^53 on the usual 4-level kernels; only [vsyscall] lies above, and it has a name.
      const header: Mapping = { lo: parseInt(m[1]!, 16), hi: parseInt(m[2]!, 16), perms: m[3]!, path: m[4]!.trimEnd() };
      if (current !== null) settle(header);
      before = current;
      current = header;
      counts = zero();
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const i = FIELD_INDEX.get(line.slice(0, colon));
    if (i === undefined) continue;
    if (current === null) throw new Error(`smaps line ${n + 1}: a ${line.slice(0, colon)} field before any mapping header`);
    counts[i]! += parseInt(line.slice(colon + 1), 10) || 0;
  }
  if (current !== null) settle(null);
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
