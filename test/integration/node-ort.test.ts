import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runNodeOrt } from "../../src/workers/node-ort.ts";
import { withProcessTmpdir } from "../../src/workers/process-tmpdir.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { ROOT } from "./pipeline-helpers.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-node-ort-"));
const model = path.join(dir, "linear.onnx");
// 4 MiB of MatMul weights: what ORT holds after the load shows in malloc's in-use figure.
const wide = path.join(dir, "wide.onnx");
// x [N, 16384] -> ReduceSum over the row: 64 KiB a sample of inputs and nothing else of note.
const wide16k = path.join(dir, "wide16k.onnx");
// x [N, 4] @ W [4, 65536]: 256 KiB of output a sample (2 MiB a request of 8), above the mmap
// threshold its 1 MiB weight leaves, so a collected output's pages go back to the kernel.
const bigOut = path.join(dir, "bigout.onnx");
// y = flatten(x) @ W with W[i, j] = (i + 2j) / 100: outputs checkable by hand.
const W = (i: number, j: number): number => (i + 2 * j) / 100;

beforeAll(() => {
  execFileSync(path.join(ROOT, ".venv/bin/python"), ["-c", `
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
W = np.fromfunction(lambda i, j: (i + 2 * j) / 100, (16, 3)).astype(np.float32)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "W"], ["y"])], "g", [x], [y], [numpy_helper.from_array(W, "W")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
onnx.save(m, ${JSON.stringify(model)})
W2 = np.full((1024, 1024), 0.001, np.float32)
x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1024])
y2 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])
g2 = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g2", [x2], [y2], [numpy_helper.from_array(W2, "W")])
m2 = helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)]); m2.ir_version = 8
onnx.save(m2, ${JSON.stringify(wide)})
x3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16384])
y3 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])
g3 = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], "g3", [x3], [y3], [numpy_helper.from_array(np.array([1], np.int64), "axes")])
m3 = helper.make_model(g3, opset_imports=[helper.make_opsetid("", 17)]); m3.ir_version = 8
onnx.save(m3, ${JSON.stringify(wide16k)})
W4 = np.full((4, 65536), 0.01, np.float32)
x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
y4 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 65536])
g4 = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g4", [x4], [y4], [numpy_helper.from_array(W4, "W")])
m4 = helper.make_model(g4, opset_imports=[helper.make_opsetid("", 17)]); m4.ir_version = 8
onnx.save(m4, ${JSON.stringify(bigOut)})
`]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// onnxruntime-node's telemetry writes mat-debug-<pid>.log into TMPDIR at the process's first
// session, and runNodeOrt its tensor file: the runs go through the test's own dir (the child
// inherits TMPDIR), as a pipeline's go through its run's.
const nodeOrt = (...args: Parameters<typeof runNodeOrt>) => withProcessTmpdir(dir, () => runNodeOrt(...args));
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const rssMiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024;

describe("node-ort in a child process", () => {
  it("marks the five phases with the child's own /proc readings, returns every output, and leaves nothing behind", async () => {
    const n = 10;
    const inputs = Float32Array.from({ length: n * 16 }, (_, k) => (k % 7) - 3);
    const phases: Array<{ name: string; mark: string; rss: number }> = [];
    const r = await nodeOrt(
      { model, inputs, shape: [n, 1, 4, 4], batchSizes: [1, 4], iterations: 5, warmup: 1, threads: 1 },
      { onPhase: (p) => phases.push({ name: p.name, mark: p.mark, rss: p.memory.rssKiB }) },
    );
    expect(r.pid).not.toBe(process.pid);
    expect(r.command).toEqual([process.execPath, expect.stringMatching(/node-ort-process\.mjs$/), "--name", "node-ort"]);
    // Settled means gone: the child has exited and its tensor file is removed.
    expect(alive(r.pid), `node-ort's process ${r.pid} still runs`).toBe(false);
    expect(readdirSync(dir).filter((f) => f.startsWith("memlane-node-ort-"))).toEqual([]);
    expect(existsSync(path.join(os.tmpdir(), `mat-debug-${r.pid}.log`)), "ORT's telemetry log left in the outer TMPDIR").toBe(false);
    expect(phases.filter((p) => p.mark === "end").map((p) => p.name)).toEqual([
      "import", "runtime-create", "model-load", "first-inference", "steady-inference",
    ]);
    for (const p of phases) expect(p.rss).toBeGreaterThan(1000);
    expect(Object.keys(r.latencyMs)).toEqual(["batch1", "batch4"]);
    expect(r.latencyMs.batch4!.p50).toBeGreaterThan(0);
    expect(r.throughputPerS).toBeGreaterThan(0);
    expect(r.outputShape).toEqual([n, 3]);
    expect(r.outputs).toBeInstanceOf(Float32Array);
    for (let s = 0; s < n; s++)
      for (let j = 0; j < 3; j++) {
        let want = 0;
        for (let i = 0; i < 16; i++) want += inputs[s * 16 + i]! * W(i, j);
        expect(r.outputs[s * 3 + j]).toBeCloseTo(want, 4);
      }
  });

  it("reads each phase's end after collecting its garbage: 66 MiB of dead outputs are in the steady peak, not in use at its end", async () => {
    // 33 requests of 8 make 66 MiB of outputs that die at once; V8 collects when ~26 MiB of them
    // pile up, so without a collection before the mark up to ~28 MiB of them were still
    // allocated at the end reading. Whether RSS falls once they are freed is glibc's affair (an
    // mmapped buffer goes back to the kernel, a heap one stays as free chunks: a CI run kept 36
    // MiB resident), so this reads malloc's in-use bytes (the addon's mallinfo2), not RSS.
    const marks: Record<string, { rss: number; hwm: number; inUse: number | undefined }> = {};
    await nodeOrt(
      { model: bigOut, inputs: new Float32Array(8 * 4).fill(1), shape: [8, 4], batchSizes: [8], iterations: 28, warmup: 5, threads: 1 },
      { onPhase: (p) => void (marks[`${p.name} ${p.mark}`] = { rss: p.memory.rssKiB / 1024, hwm: p.memory.hwmKiB / 1024, inUse: p.memory.mallocInUseKiB === undefined ? undefined : p.memory.mallocInUseKiB / 1024 }) },
    );
    const first = marks["first-inference end"]!, steady = marks["steady-inference end"]!;
    // The garbage was there during the phase: its peak is well above the first request's end.
    expect(steady.hwm - first.rss).toBeGreaterThan(20);
    // And freed by the end reading: malloc's in-use bytes back where the first request left
    // them (0.0 MiB apart in three runs; without the collection +5.9 in four, +13.9 in another).
    expect(first.inUse, "the addon's mallinfo2 (native/addon) is needed here").toBeDefined();
    expect(steady.inUse! - first.inUse!).toBeLessThan(2);
  }, 60_000);

  it("measures none of the orchestrator's memory: 160 MiB held here is not in its figures", async () => {
    // 160 MiB of 64 KiB buffers, written and kept alive: on a worker_thread (before 2026-12-02)
    // every node-ort figure carried them.
    const held: Buffer[] = Array.from({ length: 2560 }, () => Buffer.alloc(64 << 10, 1));
    const here = rssMiB();
    expect(here).toBeGreaterThan(160);
    let importStart = Infinity;
    let steadyEnd = Infinity;
    await nodeOrt(
      { model, inputs: new Float32Array(16), shape: [1, 1, 4, 4], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 },
      { onPhase: (p) => {
        if (p.name === "import" && p.mark === "start") importStart = p.memory.rssKiB / 1024;
        if (p.name === "steady-inference" && p.mark === "end") steadyEnd = p.memory.rssKiB / 1024;
      } },
    );
    expect(held.length).toBe(2560);
    expect(importStart, `import started at ${importStart.toFixed(1)} MiB; this process holds ${here.toFixed(1)} MiB`).toBeLessThan(here - 120);
    expect(steadyEnd, `steady-inference ended at ${steadyEnd.toFixed(1)} MiB; this process holds ${here.toFixed(1)} MiB`).toBeLessThan(here - 100);
  });

  it("holds its eval set once, from first-inference on: 64 MiB of inputs grow the child by about 64 MiB, not a multiple", async () => {
    const n = 1024;
    const inputs = new Float32Array(n * 16384).fill(0.5);  // 64 MiB
    const small = new Float32Array(16384);
    const marks = async (x: Float32Array, rows: number): Promise<Record<string, number>> => {
      const at: Record<string, number> = {};
      await nodeOrt(
        { model: wide16k, inputs: x, shape: [rows, 16384], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 },
        { onPhase: (p) => void (at[`${p.name} ${p.mark}`] = p.memory.rssKiB / 1024) },
      );
      return at;
    };
    const big = await marks(inputs, n);
    const one = await marks(small, 1);
    // onnxruntime-node's own phases do not carry it (the Python workers' do not either)
    const atLoad = big["model-load end"]! - one["model-load end"]!;
    expect(Math.abs(atLoad), `model-load ended ${atLoad.toFixed(1)} MiB apart`).toBeLessThan(4);
    const grown = big["first-inference start"]! - one["first-inference start"]!;
    expect(grown, `first-inference started ${grown.toFixed(1)} MiB larger with 64 MiB of inputs`).toBeGreaterThan(60);
    expect(grown).toBeLessThan(72);
  });

  it("reads glibc malloc's totals at every mark through the addon, as the Python worker does", async () => {
    // What ORT's load leaves in malloc's free lists depends on this process's history
    // (docs/memory.md, "node-ort's held memory"): calibration needs node-ort's own figure.
    const marks: Array<{ name: string; mark: string; free?: number; inUse?: number }> = [];
    await nodeOrt(
      { model: wide, inputs: new Float32Array(2 * 1024), shape: [2, 1024], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 },
      { onPhase: (p) => marks.push({ name: p.name, mark: p.mark, free: p.memory.mallocFreeKiB, inUse: p.memory.mallocInUseKiB }) },
    );
    expect(marks).toHaveLength(10);
    for (const m of marks) {
      expect(m.free, `${m.name} ${m.mark}`).toBeGreaterThanOrEqual(0);
      expect(m.inUse, `${m.name} ${m.mark}`).toBeGreaterThan(0);
    }
    const at = (name: string, mark: string) => marks.find((m) => m.name === name && m.mark === mark)!.inUse!;
    // The session holds the 4 MiB initializer (packed or not) after model-load; the figure is the
    // whole process's, and Node's own threads may free a little meanwhile, so the bound leaves
    // them 1 MiB.
    expect(at("model-load", "end") - at("model-load", "start")).toBeGreaterThan(3072);
  });

  it("rejects with the runtime's error for a missing model, and stops on abort", async () => {
    const base = { inputs: new Float32Array(16), shape: [1, 1, 4, 4], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 };
    await expect(nodeOrt({ ...base, model: path.join(dir, "missing.onnx") })).rejects.toThrow(/node-ort: /);
    const ac = new AbortController();
    ac.abort(new Error("stop"));
    await expect(nodeOrt({ ...base, model }, { signal: ac.signal })).rejects.toThrow("stop");
  });

  it("kills its process when aborted mid-run, and names a process that died", async () => {
    const base = { model, inputs: new Float32Array(16), shape: [1, 1, 4, 4], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 };
    let pid = 0;
    const ac = new AbortController();
    await expect(nodeOrt(base, {
      signal: ac.signal,
      onProcess: (p) => void (pid = p.pid),
      onPhase: (p) => { if (p.name === "model-load" && p.mark === "start") ac.abort(new Error("stop at model-load")); },
    })).rejects.toThrow("stop at model-load");
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid), `node-ort's process ${pid} outlived the abort`).toBe(false);
    // Killed from outside at its first mark: a dead worker's error, with how it died.
    const err = await nodeOrt(base, {
      onProcess: (p) => void (pid = p.pid),
      onPhase: (p) => { if (p.name === "import" && p.mark === "start") process.kill(pid, "SIGKILL"); },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkerError);
    expect((err as WorkerError).code).toBe(ErrorCode.WORKER_DIED);
    expect((err as Error).message).toMatch(new RegExp(`pid ${pid}\\) was killed by SIGKILL before its result`));
    expect(readdirSync(dir).filter((f) => f.startsWith("memlane-node-ort-"))).toEqual([]);
  });
});
