import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { fixture, pidAlive, rejection, waitUntil } from "./supervisor-helpers.ts";

let sup: Supervisor;
beforeEach(async () => {
  sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 200 } });
});
afterEach(async () => {
  await sup.close();
});

describe("supervisor with the echo fixture", () => {
  it("round-trips args and tensors, bytes equal", async () => {
    const w = await sup.spawn(fixture("echo"));
    expect(w.hello.capabilities).toEqual(["echo"]);
    const data = new Float32Array(1000).map((_, i) => i * 0.5 - 3);
    const ids = new BigInt64Array([1n, -2n, 2n ** 60n]);
    const r = await w.run("echo", { a: 1, s: "x", big: 2 ** 40, nested: { k: [1, 2] } }, {
      tensors: { x: { dtype: "float32", shape: [10, 100], data }, ids: { dtype: "int64", shape: [3], data: ids } },
    });
    expect(r.value).toEqual({ task: "echo", args: { a: 1, s: "x", big: 2 ** 40, nested: { k: [1, 2] } } });
    expect(r.workerPid).toBe(w.pid);
    expect(r.tensors.x?.shape).toEqual([10, 100]);
    expect(Buffer.from(r.tensors.x!.data.buffer, r.tensors.x!.data.byteOffset, r.tensors.x!.data.byteLength))
      .toEqual(Buffer.from(data.buffer));
    expect([...(r.tensors.ids!.data as BigInt64Array)]).toEqual([...ids]);
  });

  it("reports progress and phases", async () => {
    const w = await sup.spawn(fixture("echo"));
    const progress: string[] = [];
    const marks: string[] = [];
    const r = await w.run("phases", {}, { onProgress: (p) => progress.push(p.label), onPhase: (m) => marks.push(`${m.name}:${m.mark}`) });
    expect(progress).toEqual(["half", "done"]);
    expect(marks).toEqual(["import:start", "import:end"]);
    expect(r.phases.map((p) => p.mark)).toEqual(["start", "end"]);
  });

  it("rejects with the worker's own error, traceback and details", async () => {
    const w = await sup.spawn(fixture("echo"));
    const err = await rejection<WorkerError>(w.run("fail"));
    expect(err).toBeInstanceOf(WorkerError);
    expect(err.code).toBe(ErrorCode.TASK_FAILED);
    expect(err.codeName).toBe("TASK_FAILED");
    expect(err.message).toContain('task fail failed on worker "echo"');
    expect(err.traceback).toContain("Traceback");
    expect(err.details).toEqual({ why: "asked to" });
    expect(w.alive).toBe(true);
  });

  it("times out a task, cancels it, and keeps the worker", async () => {
    const w = await sup.spawn(fixture("echo"));
    const err = await rejection<WorkerError>(w.run("sleep", { ms: 5000 }, { timeoutMs: 200 }));
    expect(err.code).toBe(ErrorCode.TIMEOUT);
    expect(err.timedOut).toBe(true);
    expect(err.message).toMatch(/task sleep timed out after 200 ms on worker "echo" \(pid \d+\)/);
    expect((await w.run("pid")).value.pid).toBe(w.pid);
  });

  it("cancels through an AbortSignal", async () => {
    const w = await sup.spawn(fixture("echo"));
    const ac = new AbortController();
    const p = w.run("sleep", { ms: 5000 }, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("user pressed stop")), 150);
    const err = await rejection<WorkerError>(p);
    expect(err.code).toBe(ErrorCode.CANCELLED);
    expect(err.timedOut).toBe(false);
    expect((err.cause as Error).message).toBe("user pressed stop");
    expect((await w.run("echo", { after: "cancel" })).value.args).toEqual({ after: "cancel" });
  });

  it("kills a worker that does not let go of a cancelled task", async () => {
    const w = await sup.spawn(fixture("echo"), { cancelGraceMs: 300, killGraceMs: 300 });
    const pid = w.pid;
    const err = await rejection<WorkerError>(w.run("stubborn", {}, { timeoutMs: 100 }));
    expect(err.timedOut).toBe(true);
    expect(await waitUntil(() => !pidAlive(pid), 5000)).toBe(true);
    expect(w.alive).toBe(false);
  });

  it("runs concurrent tasks on one worker", async () => {
    const w = await sup.spawn(fixture("echo"));
    const rs = await Promise.all([1, 2, 3, 4].map((i) => w.run("sleep", { ms: 50 * i })));
    expect(rs.map((r) => r.value.slept)).toEqual([50, 100, 150, 200]);
  });

  it("works over ipc:// as over tcp", async () => {
    const ipc = await Supervisor.start({ transport: "ipc" });
    try {
      expect(ipc.endpoint).toMatch(/^ipc:\/\//);
      const w = await ipc.spawn(fixture("echo"));
      expect((await w.run("echo", { over: "ipc" })).value.args).toEqual({ over: "ipc" });
    } finally {
      await ipc.close();
    }
  });

  it("an already-aborted signal rejects without sending, and the worker stays", async () => {
    const w = await sup.spawn(fixture("echo"), { cancelGraceMs: 200 });
    const err = await rejection<WorkerError>(w.run("sleep", { ms: 100 }, { signal: AbortSignal.abort() }));
    expect(err.code).toBe(ErrorCode.CANCELLED);
    await new Promise((r) => setTimeout(r, 400));
    expect(w.alive).toBe(true);
  });

  it("a throwing onProgress rejects the task with that error and cancels it", async () => {
    const w = await sup.spawn(fixture("echo"));
    const err = await rejection<WorkerError>(w.run("phases", {}, { onProgress: () => { throw new Error("caller bug"); } }));
    expect(err.code).toBe(ErrorCode.TASK_FAILED);
    expect(err.message).toContain("handling its progress message threw: caller bug");
    expect((err.cause as Error).message).toBe("caller bug");
    expect(w.alive).toBe(true);
  });

  it("a blocked orchestrator event loop is not mistaken for a hung worker", async () => {
    const w = await sup.spawn(fixture("echo"), { heartbeatIntervalMs: 100, heartbeatTimeoutMs: 1500 });
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      // busy: timers and the broker's receive loop cannot run
    }
    await new Promise((r) => setTimeout(r, 400));
    expect(w.alive).toBe(true);
    expect((await w.run("pid")).value.pid).toBe(w.pid);
  });
});
