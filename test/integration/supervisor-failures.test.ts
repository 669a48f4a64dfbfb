import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { fixture, pidAlive, rejection, waitUntil } from "./supervisor-helpers.ts";

let sup: Supervisor;
beforeEach(async () => {
  sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 100, killGraceMs: 500, stopGraceMs: 500 } });
});
afterEach(async () => {
  await sup.close();
});

describe("workers that fail", () => {
  it("crash: exit code 3 mid-task rejects with exitCode and the stderr tail", async () => {
    const w = await sup.spawn(fixture("crash"));
    const err = await rejection<WorkerError>(w.run("infer.ort", { mode: "exit" }));
    expect(err).toBeInstanceOf(WorkerError);
    expect(err.code).toBe(ErrorCode.WORKER_DIED);
    expect(err.exitCode).toBe(3);
    expect(err.signal).toBeUndefined();
    expect(err.message).toMatch(/^worker "crash" \(pid \d+\) exited with code 3 during task infer\.ort$/);
    expect(err.stderrTail).toContain("crash fixture: giving up during task infer.ort");
    expect(err.stderrTail.length).toBeLessThanOrEqual(4096);
    expect(err.worker).toEqual({ name: "crash", pid: w.pid });
    expect(err.task).toBe("infer.ort");
  });

  it("verbose forwards the worker's output line by line with its name", async () => {
    const lines: string[] = [];
    const w = await sup.spawn(fixture("crash", "loud"), { verbose: (l) => lines.push(l) });
    await rejection(w.run("x", { mode: "exit" }));
    expect(lines).toContain("[loud:err] crash fixture: giving up during task x (mode exit)");
  });

  it("crash: an uncaught Python exception shows its traceback in the stderr tail", async () => {
    const w = await sup.spawn(fixture("crash"));
    const err = await rejection<WorkerError>(w.run("train", { mode: "raise" }));
    expect(err.exitCode).toBe(1);
    expect(err.stderrTail).toContain("RuntimeError: crash fixture raised on purpose");
  });

  it("SIGKILL mid-task names the worker and the signal", async () => {
    const w = await sup.spawn(fixture("echo", "python-ort"));
    const p = w.run("sleep", { ms: 10_000 });
    setTimeout(() => process.kill(w.pid!, "SIGKILL"), 150);
    const err = await rejection<WorkerError>(p);
    expect(err.code).toBe(ErrorCode.WORKER_DIED);
    expect(err.signal).toBe("SIGKILL");
    expect(err.message).toBe(`worker "python-ort" (pid ${w.pid}) was killed by SIGKILL during task sleep`);
  });

  it("a worker that SIGKILLs itself rejects every in-flight task", async () => {
    const w = await sup.spawn(fixture("crash"));
    const errs = await Promise.all([w.run("a", { mode: "sigkill" }), w.run("b", { mode: "sigkill" })].map((p) => rejection<WorkerError>(p)));
    expect(errs.map((e) => e.signal)).toEqual(["SIGKILL", "SIGKILL"]);
    expect(errs.map((e) => e.task)).toEqual(["a", "b"]);
    const after = await rejection<WorkerError>(w.run("c"));
    expect(after.code).toBe(ErrorCode.WORKER_DIED);
    expect(after.message).toContain("is not running");
  });

  it("hang: silence past the heartbeat timeout kills it and rejects with timedOut", async () => {
    // Long enough that a loaded machine's slow heartbeat replies before the task do not count.
    const w = await sup.spawn(fixture("hang"), { heartbeatTimeoutMs: 1500 });
    const started = Date.now();
    const err = await rejection<WorkerError>(w.run("anything"));
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(err.code).toBe(ErrorCode.TIMEOUT);
    expect(err.timedOut).toBe(true);
    expect(err.signal).toBe("SIGKILL");
    expect(err.message).toMatch(/^worker "hang" \(pid \d+\) stopped answering heartbeats \(silent for \d+ ms\); it was killed by SIGKILL during task anything$/);
    expect(pidAlive(w.pid)).toBe(false);
  });

  it("wrong version: spawn fails naming both versions and the worker is stopped", async () => {
    const before = new Set(sup.workers);
    const err = await rejection<WorkerError>(sup.spawn(fixture("wrong_version")));
    expect(err).toBeInstanceOf(WorkerError);
    expect(err.code).toBe(ErrorCode.VERSION_MISMATCH);
    expect(err.message).toContain("worker speaks protocol v2, orchestrator speaks v1");
    expect(err.worker.pid).toBeDefined();
    expect(pidAlive(err.worker.pid)).toBe(false);
    expect(new Set(sup.workers)).toEqual(before);
  });

  it("a command that does not exist fails the spawn with a clear error", async () => {
    const err = await rejection<WorkerError>(sup.spawn({ name: "ghost", command: "/nonexistent/memlane-ghost" }));
    expect(err.code).toBe(ErrorCode.WORKER_DIED);
    expect(err.message).toContain('could not start worker "ghost"');
    expect(err.message).toContain("/nonexistent/memlane-ghost");
  });

  it("no hello in time: TIMEOUT, and the process is gone", async () => {
    const spec = { name: "mute", command: "/bin/sh", args: ["-c", "sleep 30", "sh"] };
    const err = await rejection<WorkerError>(sup.spawn(spec, { helloTimeoutMs: 300 }));
    expect(err.code).toBe(ErrorCode.TIMEOUT);
    expect(err.timedOut).toBe(true);
    expect(err.message).toMatch(/worker "mute" \(pid \d+\) sent no hello within 300 ms/);
    expect(pidAlive(err.worker.pid)).toBe(false);
  });

  it("retries on a fresh worker when the worker dies", async () => {
    const w = await sup.spawn(fixture("echo"));
    const first = w.pid!;
    const p = w.run("sleep", { ms: 1500 }, { retries: 1 });
    setTimeout(() => process.kill(first, "SIGKILL"), 200);
    const r = await p;
    expect(r.value.slept).toBe(1500);
    expect(r.workerPid).not.toBe(first);
    expect(w.pid).toBe(r.workerPid);
    expect(pidAlive(first)).toBe(false);
  });

  it("does not retry a task error", async () => {
    const w = await sup.spawn(fixture("echo"));
    const first = w.pid;
    const err = await rejection<WorkerError>(w.run("fail", {}, { retries: 3 }));
    expect(err.code).toBe(ErrorCode.TASK_FAILED);
    expect(w.pid).toBe(first);
  });

  it("names the option that was wrong", async () => {
    const w = await sup.spawn(fixture("echo"));
    await expect(w.run("echo", {}, { timeoutMs: -1 })).rejects.toThrow('run("echo") option `timeoutMs`: expected a number > 0, got -1');
    await expect(sup.spawn(fixture("echo"), { heartbeatIntervalMs: 0 })).rejects.toThrow("spawn option `heartbeatIntervalMs`");
  });
});

describe("stop by escalation", () => {
  it("a polite worker exits 0 on the shutdown message", async () => {
    const w = await sup.spawn(fixture("echo"));
    const info = await w.stop();
    expect(info.exitCode).toBe(0);
    expect(pidAlive(w.pid)).toBe(false);
  });

  it("ignoring shutdown gets SIGTERM", async () => {
    const w = await sup.spawn(fixture("echo", "deaf", { ECHO_IGNORE_SHUTDOWN: "1" }));
    const info = await w.stop();
    expect(info.signal).toBe("SIGTERM");
    expect(pidAlive(w.pid)).toBe(false);
  });

  it("ignoring shutdown and SIGTERM gets SIGKILL; in-flight tasks reject CANCELLED", async () => {
    const w = await sup.spawn(fixture("echo", "stubborn", { ECHO_IGNORE_SHUTDOWN: "1", ECHO_IGNORE_SIGTERM: "1" }));
    const p = rejection<WorkerError>(w.run("sleep", { ms: 10_000 }));
    const info = await w.stop();
    expect(info.signal).toBe("SIGKILL");
    expect(pidAlive(w.pid)).toBe(false);
    const err = await p;
    expect(err.code).toBe(ErrorCode.CANCELLED);
    expect(err.message).toMatch(/worker "stubborn" \(pid \d+\) was stopped during task sleep; it was killed by SIGKILL/);
  });

  it("close() stops every worker", async () => {
    const ws = await Promise.all([sup.spawn(fixture("echo", "a")), sup.spawn(fixture("echo", "b"))]);
    await sup.close();
    expect(ws.map((w) => pidAlive(w.pid))).toEqual([false, false]);
    expect(await waitUntil(() => sup.workers.size === 0)).toBe(true);
  });
});
