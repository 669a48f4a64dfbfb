// node-ort's per-op profile (docs/profiling.md), plain JavaScript for its child process:
// ORT's own profiler in a second session after the timed calls. endProfiling() returns no
// path in onnxruntime-node, so the session profiles into a fresh temp dir (the run's scratch
// dir) and the one file there is read, summed per node like the Python worker's
// (python/memlane_worker/tasks/ort_profile.py), and removed with its dir.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const KERNEL_SUFFIX = "_kernel_time";

/** Kernel events that start at or after `afterUs`, summed per node: [{name, opType, totalMs, minMs, calls}]. */
export function parseOrtProfile(events, afterUs = 0) {
  const byNode = new Map();
  for (const e of events) {
    const name = e.name ?? "";
    if (e.cat !== "Node" || !name.endsWith(KERNEL_SUFFIX) || Number(e.ts ?? 0) < afterUs) continue;
    const node = name.slice(0, -KERNEL_SUFFIX.length);
    let rec = byNode.get(node);
    if (!rec) byNode.set(node, (rec = { name: node, opType: e.args?.op_name ?? "?", totalMs: 0, minMs: Infinity, calls: 0 }));
    const ms = Number(e.dur ?? 0) / 1000;
    rec.totalMs += ms;
    rec.minMs = Math.min(rec.minMs, ms);
    rec.calls += 1;
  }
  return [...byNode.values()];
}

/** End (µs since the profile began) of the first model_run: the warm-up call. */
export function firstRunEnd(events) {
  const runs = events.filter((e) => e.cat === "Session" && e.name === "model_run" && e.ts !== undefined).map((e) => [Number(e.ts), Number(e.dur ?? 0)]);
  runs.sort((a, b) => a[0] - b[0]);
  return runs.length ? runs[0][0] + runs[0][1] : 0;
}

/**
 * One warm-up call, then `runs` profiled ones of `run(session)` at `batch`. The session is
 * released in every case (a failing call too), before its profile dir is removed.
 */
export async function profileOrt(ort, model, options, run, batch, runs) {
  const dir = mkdtempSync(join(tmpdir(), "memlane-node-ort-profile-"));
  let session = null;
  try {
    session = await ort.InferenceSession.create(model, { ...options, enableProfiling: true, profileFilePrefix: join(dir, "ort") });
    await run(session);
    let wall = 0;
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      await run(session);
      wall += performance.now() - t0;
    }
    const done = session;
    session = null;
    done.endProfiling();
    await done.release?.();
    const files = readdirSync(dir).filter((f) => f.endsWith(".json"));
    if (files.length !== 1) return { batch, unavailable: `onnxruntime-node wrote ${files.length} profile files (expected 1)` };
    const events = JSON.parse(readFileSync(join(dir, files[0]), "utf8"));
    return { batch, runs, wallMsMean: wall / runs, ops: parseOrtProfile(events, firstRunEnd(events)) };
  } finally {
    if (session) {
      // A call failed: close the profiler's file and the session; the call's error is the one to report.
      try {
        session.endProfiling();
      } catch {}
      try {
        await session.release?.();
      } catch {}
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
