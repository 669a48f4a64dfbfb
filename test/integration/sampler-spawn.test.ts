// The orchestrator samples a worker from its spawn, not from its hello: a worker's start-up
// (interpreter, imports, whatever it does before saying hello) is in its samples, under the
// worker's label, and every process of a retried task is tracked. Real processes, real /proc.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { RunSession } from "../../src/pipeline/session.ts";
import { PIPELINE_DEFAULTS } from "../../src/pipeline/options.ts";
import { createProgress } from "../../src/pipeline/progress.ts";
import { pythonWorker } from "../../src/pipeline/exec-model.ts";
import { combinePhases } from "../../src/memory/phases.ts";
import { fixture, rejection } from "./supervisor-helpers.ts";

const silent = createProgress({ out: () => {}, err: () => {}, isTTY: false, redraw: () => {}, columns: 80 }, true);
const dir = mkdtempSync(join(tmpdir(), "memlane-spawn-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("sampling from spawn", () => {
  let session: RunSession | undefined;
  const open = (): RunSession => (session = new RunSession("spawn", "t", dir, PIPELINE_DEFAULTS, silent, undefined));
  afterEach(async () => {
    await session?.close();
    session = undefined;
  });

  it("samples a worker's start-up before its hello, under its label, until it exits", async () => {
    const s = open();
    let helloAt = 0;
    const spec = { ...fixture("echo", "slow-start", { ECHO_STARTUP_MIB: "64", ECHO_HELLO_DELAY_MS: "600" }), label: "slow start" };
    const run = await s.runTask(spec, "phases", {}, { onWorker: () => void (helloAt = Date.now()) });
    const track = s.sampler.snapshot().find((t) => t.pid === run.pid)!;
    expect(track.label).toBe("slow start");
    expect(track.exited).toBe(true);
    const before = track.samples.filter((x) => x.tMs <= helloAt);
    // 600 ms at 20 Hz: about 12 samples before the hello; at the old hello-time start, none.
    expect(before.length, `samples before hello at ${helloAt}: ${track.samples.map((x) => x.tMs).join(", ")}`).toBeGreaterThanOrEqual(3);
    expect(track.samples[0]!.tMs).toBeLessThan(helloAt - 300);
    // The 64 MiB touched before the hello are in the orchestrator's own readings.
    expect(Math.max(...before.map((x) => x.rssKiB))).toBeGreaterThan(64 * 1024);
    // Phase accounting is unchanged: the task's marks pair with the same pid's samples.
    const phases = combinePhases(run.result.phases, s.sampler.samples(run.pid));
    expect(phases.map((p) => p.name)).toContain("import");
  });

  it("samples the real python worker before its hello, and its import phase", async () => {
    const s = open();
    let helloAt = 0;
    const run = await s.runTask(pythonWorker("spawn-info"), "worker.info", {}, { onWorker: () => void (helloAt = Date.now()) });
    const samples = s.sampler.samples(run.pid);
    // Interpreter start-up plus zmq/msgpack imports, before the hello (the old start of tracking).
    expect(samples.length).toBeGreaterThan(0);
    expect(samples[0]!.tMs, `first sample vs hello at ${helloAt}`).toBeLessThanOrEqual(helloAt);
    expect(samples[0]!.rssKiB).toBeGreaterThan(0);
  });

  it("tracks the fresh process of a retry as well, under the same label", async () => {
    const s = open();
    const pids: number[] = [];
    const err = await rejection(
      s.runTask({ ...fixture("crash", "crash-twice"), label: "crashing" }, "t", { mode: "exit" }, {
        retries: 1,
        onWorker: (w) => void pids.push(w.pid!),
      }),
    );
    expect(String(err)).toMatch(/exit|code 3/);
    const tracks = s.sampler.snapshot().filter((t) => t.label === "crashing");
    expect(tracks).toHaveLength(2);
    expect(tracks.map((t) => t.pid)).toContain(pids[0]);
    expect(new Set(tracks.map((t) => t.pid)).size).toBe(2);
    expect(tracks.every((t) => t.exited)).toBe(true);
  });
});
