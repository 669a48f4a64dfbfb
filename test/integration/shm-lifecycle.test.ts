/**
 * Segments do not outlive their run: an orchestrator-like child that exits, or is stopped by
 * SIGTERM/SIGINT, unlinks its own; one that is SIGKILLed leaves them, and the next start-up's
 * sweep removes them because their owner pid is dead (checked in /dev/shm).
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { sweepStaleSegments, ShmRegistry } from "../../src/transport/shm.ts";
import { shmAddon } from "./shm-addon.ts";
import { pidAlive, waitUntil } from "./supervisor-helpers.ts";

const root = resolve(import.meta.dirname, "..", "..");
const CHILD = join(root, "test/integration/shm-orchestrator-child.ts");
const inShm = (names: string[]) => names.filter((n) => readdirSync("/dev/shm").includes(n));

async function startChild(runId: string, mode: "wait" | "exit" | "task", addonPath = "") {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, runId, "3", mode, addonPath], {
    cwd: root,
    // The suite turns start-up sweeps off (vitest.config.ts); these children are the
    // orchestrators whose sweep is under test.
    env: { ...process.env, MEMLANE_SHM_SWEEP: "1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((res, rej) => {
    createInterface({ input: child.stdout! }).once("line", res);
    child.once("exit", (code) => rej(new Error(`child exited ${code} before printing its segments`)));
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => {
    if (child.exitCode !== null || child.signalCode !== null) res({ code: child.exitCode, signal: child.signalCode });
    else child.once("exit", (code, signal) => res({ code, signal }));
  });
  return { child, exited, ...(JSON.parse(line) as { pid: number; names: string[]; worker?: number }) };
}

describe.skipIf(!existsSync("/dev/shm"))("shm segment lifecycle", () => {
  const addonPath = shmAddon()?.path ?? "";

  it("a SIGKILLed orchestrator's segments stay until the start-up sweep removes them", async () => {
    const runId = `kill-${process.pid}`;
    const { child, exited, pid, names } = await startChild(runId, "wait", addonPath);
    expect(names).toEqual([0, 1, 2].map((n) => `memlane-${pid}-${runId}-${n}`));
    expect(inShm(names)).toEqual(names);
    child.kill("SIGKILL");
    expect((await exited).signal).toBe("SIGKILL");
    expect(inShm(names)).toEqual(names); // no hook ran
    // A live orchestrator's segments are not swept.
    const mine = new ShmRegistry({ runId: `live-${process.pid}`, thresholdBytes: 0, exitHooks: false, sweep: false });
    const kept = mine.allocate(10).name;
    const removed = sweepStaleSegments();
    expect(removed).toEqual(expect.arrayContaining(names));
    expect(removed).not.toContain(kept);
    expect(inShm(names)).toEqual([]);
    expect(inShm([kept])).toEqual([kept]);
    mine.close();
  });

  it("the next orchestrator's first registry sweeps a killed one's segments at start-up", async () => {
    const killed = await startChild(`crash-${process.pid}`, "wait", addonPath);
    killed.child.kill("SIGKILL");
    await killed.exited;
    expect(inShm(killed.names)).toEqual(killed.names);
    const next = await startChild(`next-${process.pid}`, "exit", addonPath);
    await next.exited;
    expect(inShm(killed.names)).toEqual([]);
  });

  it("an orchestrator SIGKILLed with tasks in flight: their segments are swept by the next start-up", async () => {
    const killed = await startChild(`task-${process.pid}`, "task", addonPath);
    expect(killed.names).toEqual([0, 1, 2].map((n) => `memlane-${killed.pid}-task-${process.pid}-${n}`));
    expect(inShm(killed.names)).toEqual(killed.names);
    killed.child.kill("SIGKILL");
    await killed.exited;
    // Its worker notices the orchestrator is gone and exits; the segments stay: nobody unlinked them.
    expect(await waitUntil(() => !pidAlive(killed.worker), 10_000)).toBe(true);
    expect(inShm(killed.names)).toEqual(killed.names);
    const next = await startChild(`after-task-${process.pid}`, "exit", addonPath);
    await next.exited;
    expect(inShm(killed.names)).toEqual([]);
  }, 30_000);

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal}: the exit hooks unlink the run's segments and the process still dies of the signal`, async () => {
      const { child, exited, names } = await startChild(`${signal}-${process.pid}`, "wait", addonPath);
      expect(inShm(names)).toEqual(names);
      child.kill(signal);
      expect((await exited).signal).toBe(signal);
      expect(inShm(names)).toEqual([]);
    });
  }

  it("a normal exit without close() unlinks them too", async () => {
    const { exited, names } = await startChild(`exit-${process.pid}`, "exit", addonPath);
    expect((await exited).code).toBe(0);
    expect(inShm(names)).toEqual([]);
  });
});
