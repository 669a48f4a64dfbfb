/**
 * Segment names (`memlane-<orchestrator pid>-<runId>-<n>`) and the sweep that removes the
 * segments of orchestrators that died without unlinking them (SIGKILL, crash).
 */
import { readdirSync } from "node:fs";
import { SHM_DIR, unlinkSegment } from "./shm-segment.ts";

const SEGMENT_RE = /^memlane-(\d+)-(.+)-(\d+)$/;

export function segmentName(pid: number, runId: string, n: number): string {
  return `memlane-${pid}-${sanitizeRunId(runId)}-${n}`;
}
export function sanitizeRunId(runId: string): string {
  return runId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 200) || "run";
}
export function parseSegmentName(name: string): { pid: number; runId: string; n: number } | null {
  const m = SEGMENT_RE.exec(name);
  return m ? { pid: Number(m[1]), runId: m[2]!, n: Number(m[3]) } : null;
}

/** Whether a pid names a live process (EPERM: alive, owned by someone else). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Unlinks memlane segments whose owner pid is dead (an orchestrator killed before its exit
 * hooks ran). Returns the names removed. Segments of live processes are left alone.
 */
export function sweepStaleSegments(options: { dir?: string; addonPath?: string } = {}): string[] {
  let names: string[];
  try {
    names = readdirSync(options.dir ?? SHM_DIR);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const parsed = parseSegmentName(name);
    if (!parsed || parsed.pid === process.pid || alive(parsed.pid)) continue;
    try {
      if (unlinkSegment(name, options.addonPath)) removed.push(name);
    } catch {
      // another sweeper won the race, or not ours to remove
    }
  }
  return removed;
}

