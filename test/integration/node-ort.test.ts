import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runNodeOrt } from "../../src/workers/node-ort.ts";
import { withProcessTmpdir } from "../../src/workers/process-tmpdir.ts";
import { ROOT } from "./pipeline-helpers.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-node-ort-"));
const model = path.join(dir, "linear.onnx");
// 4 MiB of MatMul weights: what ORT holds after the load shows in malloc's in-use figure.
const wide = path.join(dir, "wide.onnx");
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
`]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// onnxruntime-node's telemetry writes mat-debug-<pid>.log into TMPDIR at the process's first
// session: the runs go through the test's own dir, as a pipeline's go through its run's.
const ortTelemetryLog = path.join(os.tmpdir(), `mat-debug-${process.pid}.log`);
const nodeOrt = (...args: Parameters<typeof runNodeOrt>) => withProcessTmpdir(dir, () => runNodeOrt(...args));

describe("node-ort on a worker_thread", () => {
  it("marks the five phases with the orchestrator's own /proc readings and returns every output", async () => {
    const n = 10;
    const inputs = Float32Array.from({ length: n * 16 }, (_, k) => (k % 7) - 3);
    const phases: Array<{ name: string; mark: string; rss: number }> = [];
    const r = await nodeOrt(
      { model, inputs, shape: [n, 1, 4, 4], batchSizes: [1, 4], iterations: 5, warmup: 1, threads: 1 },
      { onPhase: (p) => phases.push({ name: p.name, mark: p.mark, rss: p.memory.rssKiB }) },
    );
    expect(r.pid).toBe(process.pid);
    expect(existsSync(ortTelemetryLog), `${ortTelemetryLog} left in TMPDIR`).toBe(false);
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

  it("starts its import phase from what the orchestrator holds, not from garbage the orchestrator left", async () => {
    // 160 MiB of 64 KiB buffers, written, then dropped: malloc's heap holds them until V8
    // collects, which nothing in this synchronous stretch makes it do.
    const rssMiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024;
    let garbage: Buffer[] | null = Array.from({ length: 2560 }, () => Buffer.alloc(64 << 10, 1));
    const withGarbage = rssMiB();
    expect(garbage.length).toBe(2560);
    garbage = null;
    let importStart = Infinity;
    await nodeOrt(
      { model, inputs: new Float32Array(16), shape: [1, 1, 4, 4], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 },
      { onPhase: (p) => { if (p.name === "import" && p.mark === "start") importStart = p.memory.rssKiB / 1024; } },
    );
    expect(importStart, `import started at ${importStart.toFixed(1)} MiB, ${withGarbage.toFixed(1)} MiB with the garbage`)
      .toBeLessThan(withGarbage - 100);
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
    // whole process's, and the orchestrator's other threads free a little meanwhile (3987 KiB
    // once in 10 runs), so the bound leaves them 1 MiB.
    expect(at("model-load", "end") - at("model-load", "start")).toBeGreaterThan(3072);
  });

  it("rejects with the runtime's error for a missing model, and stops on abort", async () => {
    const base = { inputs: new Float32Array(16), shape: [1, 1, 4, 4], batchSizes: [1], iterations: 1, warmup: 0, threads: 1 };
    await expect(nodeOrt({ ...base, model: path.join(dir, "missing.onnx") })).rejects.toThrow(/node-ort: /);
    const ac = new AbortController();
    ac.abort(new Error("stop"));
    await expect(nodeOrt({ ...base, model }, { signal: ac.signal })).rejects.toThrow("stop");
  });
});
