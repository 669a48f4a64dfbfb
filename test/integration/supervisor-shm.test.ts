/**
 * The supervisor sends input tensors of >= the threshold through shared memory to workers
 * that say `shm` in their hello (real processes: the echo fixture with ECHO_SHM=1 and the
 * Python worker), frames to the others; the bytes that come back are those of the frame
 * path; no memlane-<pid>-<runId>-* segment is left in /dev/shm after the run, also when a
 * worker is SIGKILLed mid-task. (An orchestrator's own SIGKILL: shm-lifecycle.test.ts.)
 */
import { existsSync, readdirSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import type { Tensor } from "../../src/transport/codec.ts";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { ShmRegistry } from "../../src/transport/shm.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { workerSpecs } from "../../src/workers/specs.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { fixture, rejection, waitUntil } from "./supervisor-helpers.ts";

const segmentsOf = (runId: string): string[] => readdirSync("/dev/shm").filter((n) => n.startsWith(`memlane-${process.pid}-${runId}-`));

function inputs(): Record<string, Tensor> {
  const big = new Float32Array(3 * 256 * 1024); // 3 MiB: over the 1 MiB default
  for (let i = 0; i < big.length; i++) big[i] = Math.sin(i) * 100;
  return {
    big: { dtype: "float32", shape: [3, 256, 1024], data: big },
    small: { dtype: "int64", shape: [4], data: new BigInt64Array([1n, -2n, 3n, 2n ** 60n]) },
  };
}
const bytes = (t: Tensor): Buffer => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);

describe.skipIf(!existsSync("/dev/shm"))("supervisor: large tensors through shared memory", () => {
  let sup: Supervisor | undefined;
  let reg: ShmRegistry | undefined;
  afterEach(async () => {
    await sup?.close();
    reg?.close();
  });

  async function start(runId: string): Promise<Supervisor> {
    reg = new ShmRegistry({ runId, exitHooks: false, sweep: false });
    sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 200 }, shm: reg });
    return sup;
  }

  it("a worker that says `shm` gets the large tensor as an shm ref; outputs equal the frame path's", async () => {
    const runId = `sup-shm-${process.pid}`;
    const s = await start(runId);
    const viaShm = await s.spawn(fixture("echo", "echo-shm", { ECHO_SHM: "1" }));
    const viaFrames = await s.spawn(fixture("echo", "echo-frames"));
    expect(viaShm.hello.capabilities).toContain("shm");
    expect(viaFrames.hello.capabilities).not.toContain("shm");
    const t = inputs();
    const a = await viaShm.run("echo", { k: 1 }, { tensors: t });
    const b = await viaFrames.run("echo", { k: 1 }, { tensors: t });
    expect(a.value.viaShm).toEqual(["big"]); // what the worker itself received
    expect(b.value.viaShm).toBeUndefined();
    for (const name of ["big", "small"]) {
      expect(a.tensors[name]!.shape).toEqual(t[name]!.shape);
      expect(bytes(a.tensors[name]!).equals(bytes(t[name]!)), name).toBe(true);
      expect(bytes(a.tensors[name]!).equals(bytes(b.tensors[name]!)), name).toBe(true);
    }
    // The task's segment is unlinked once the worker answered, not only at the run's end.
    expect(segmentsOf(runId)).toEqual([]);
    expect(reg!.names).toEqual([]);
  });

  it("the Python worker reads it from shared memory (worker.info says how each tensor came)", async () => {
    const runId = `sup-shm-py-${process.pid}`;
    const s = await start(runId);
    const w = await s.spawn(workerSpecs.python({ name: "py-shm" }));
    expect(w.hello.capabilities).toContain("shm");
    const r = await w.run("worker.info", {}, { tensors: inputs() });
    expect(r.value.tensorsVia).toEqual({ big: "shm", small: "frame" });
    expect(segmentsOf(runId)).toEqual([]);
  }, 60_000);

  it("below the threshold, or without a registry, everything is a frame", async () => {
    const runId = `sup-shm-small-${process.pid}`;
    reg = new ShmRegistry({ runId, thresholdBytes: 16 << 20, exitHooks: false, sweep: false });
    sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 200 }, shm: reg });
    const w = await sup.spawn(fixture("echo", "echo-shm", { ECHO_SHM: "1" }));
    const r = await w.run("echo", {}, { tensors: inputs() });
    expect(r.value.viaShm).toBeUndefined();
    await sup.close();
    sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 200 } });
    const w2 = await sup.spawn(fixture("echo", "echo-shm", { ECHO_SHM: "1" }));
    expect((await w2.run("echo", {}, { tensors: inputs() })).value.viaShm).toBeUndefined();
  });

  it("a worker SIGKILLed mid-task: the task rejects WORKER_DIED and the run's segments are gone", async () => {
    const runId = `sup-shm-kill-${process.pid}`;
    const s = await start(runId);
    const w = await s.spawn(fixture("echo", "echo-shm", { ECHO_SHM: "1" }));
    const pending = w.run("sleep", { ms: 30_000 }, { tensors: inputs() });
    expect(await waitUntil(() => segmentsOf(runId).length === 1)).toBe(true);
    process.kill(w.pid!, "SIGKILL");
    const err = await rejection<WorkerError>(pending);
    expect(err.code).toBe(ErrorCode.WORKER_DIED);
    expect(err.signal).toBe("SIGKILL");
    expect(segmentsOf(runId)).toEqual([]);
    // And a segment still held when the run ends is unlinked by the registry's close.
    const w2 = await s.spawn(fixture("echo", "echo-shm2", { ECHO_SHM: "1" }));
    const held = w2.run("sleep", { ms: 30_000 }, { tensors: inputs() });
    expect(await waitUntil(() => segmentsOf(runId).length === 1)).toBe(true);
    // Handle the task's rejection before closing: the close rejects it, and a rejection with no
    // handler yet is an unhandled one (vitest fails the whole run on it).
    const heldRejected = rejection(held);
    reg!.close();
    expect(segmentsOf(runId)).toEqual([]);
    await s.close();
    await heldRejected;
  });
});
