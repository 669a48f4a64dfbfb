// memlane-rt's device-memory estimate (src/estimate/cuda-device.ts) without a GPU: the
// allocations memlane_cuda_bench --budget reads from a real compiled plan (device_budget.h,
// what the backend allocates by), the formula over them, the stage lines of a real H200 run,
// and the calibration's refusal where no GPU answers.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { compileOnnx } from "../../src/compiler/index.ts";
import { calibrateCudaDevice, cudaBenchBinary, deviceBudget, predictDevice, readStages } from "../../src/estimate/cuda-device.ts";
import { ensureModels } from "../fixtures/onnx/models.ts";

const MIB = 1024 * 1024;
const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-cuda-estimate-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const align = (x: number, a: number) => Math.ceil(x / a) * a;

describe.skipIf(!cudaBenchBinary())("CUDA device estimate (no GPU needed)", () => {
  it("reads the backend's allocations from a compiled plan, following the switches", async () => {
    const { dir: models, manifest } = ensureModels();
    const plan = path.join(dir, "resnet-mini.mlplan");
    const s = await compileOnnx(path.join(models, manifest["resnet-mini"]!.onnx), plan);
    const inBytes = s.inputs[0]!.shape.slice(1).reduce((a, d) => a * d, 1) * 4;
    const b = deviceBudget(plan, 16);
    expect(b.maxBatch).toBe(16);
    expect(b.perContext.map((a) => a.name)).toEqual(["cublas-workspace", "arena", "im2col", "input-slot", "input-slot"]);
    const bytes = (n: string) => b.perContext.find((a) => a.name === n)!.bytes;
    expect(bytes("cublas-workspace")).toBe(32 * MIB);
    expect(bytes("arena")).toBe(align(16 * s.arenaBytesPerSample, 256));
    expect(bytes("input-slot")).toBe(align(16 * inBytes, 16));
    expect(b.weightBytes).toBeGreaterThan(0);
    expect(b.perRequest).toEqual([]);

    const h = deviceBudget(plan, 16, { fp16: true });
    expect(h.perContext.find((a) => a.name === "arena")!.bytes).toBe(align(16 * s.arenaBytesPerSample / 2, 256));
    expect(h.perContext.filter((a) => a.name === "output-slot")).toHaveLength(2);
    expect(h.weightBytes).toBeLessThan(b.weightBytes);
    expect(h.uploadStagingBytes).toBeGreaterThan(0);

    const r = deviceBudget(plan, 16, { arena: "per-request", overlap: false, asyncOutputs: false, contexts: 3 });
    expect(r.contexts).toBe(3);
    expect(r.perContext.map((a) => a.name)).toEqual(["cublas-workspace"]);
    expect(r.perRequest.map((a) => a.name)).toEqual(["arena", "im2col"]);
    expect(() => deviceBudget(path.join(dir, "missing.mlplan"), 1)).toThrow(/missing\.mlplan/);
  });

  it("adds the calibrated context and per-context costs to the allocations, each rounded to the granule", () => {
    const b = { maxBatch: 8, weightBytes: 5 * MIB + 1, uploadStagingBytes: 3 * MIB, contexts: 2,
      perContext: [{ name: "cublas-workspace", bytes: 32 * MIB }, { name: "arena", bytes: 100 }, { name: "input-slot", bytes: 2 * MIB + 1 }],
      perRequest: [] };
    const e = predictDevice(b, { contextMiB: 500, perContextMiB: 60, granuleMiB: 2 });
    // weights 5 MiB + 1 B -> 6; per context 32 + 2 + 4 = 38 allocated + 60 fixed, twice.
    expect(e.parts).toEqual({ contextMiB: 500, weightsMiB: 6, perContextFixedMiB: 60, perContextAllocationsMiB: 38, contexts: 2, transientMiB: 4 });
    expect(e.loadMiB).toBe(500 + 6 + 2 * 98);
    expect(e.peakMiB).toBe(e.loadMiB + 4); // the fp16 upload staging, 3 MiB rounded
    const per = predictDevice({ ...b, uploadStagingBytes: 0, perRequest: [{ name: "arena", bytes: 10 * MIB }, { name: "im2col", bytes: 0 }] }, { contextMiB: 500, perContextMiB: 60, granuleMiB: 2 });
    expect(per.peakMiB - per.loadMiB).toBe(2 * 10); // every context may run a request at once
  });

  it("reads the stage lines memlane_cuda_bench printed on an H200", () => {
    // As printed on 2026-12-04 (the fixture mlp plan, contexts=1); a run of no requests prints
    // non-JSON timings (-nan), which the reader must skip.
    const out = [
      '{"stage":"device","name":"NVIDIA H200","driver":13000,"runtime":13000,"totalBytes":150109880320}',
      '{"stage":"context","deviceUsedBytes":543162368,"weightBytesDevice":0,"arenaBytes":0,"workspaceBytes":0}',
      '{"stage":"prepared","deviceUsedBytes":650117120,"weightBytesDevice":69120,"arenaBytes":1024,"workspaceBytes":33554944}',
      '{"available":true,"batch":1,"iterations":0,"sync":{"p50":-1.0000,"p99":-1.0000,"throughputPerS":-nan}}',
    ].join("\n");
    expect(readStages(out)).toEqual({ device: { name: "NVIDIA H200", driver: 13000, runtime: 13000 }, contextBytes: 543162368, preparedBytes: 650117120 });
    expect(readStages('{"available":false,"reason":"BACKEND_UNAVAILABLE: no CUDA driver"}').unavailable).toMatch(/no CUDA driver/);
  });

  it.skipIf(existsSync("/dev/nvidiactl"))("refuses to calibrate where no GPU answers, saying why", () => {
    expect(() => calibrateCudaDevice(path.join(dir, "resnet-mini.mlplan"))).toThrow(/no CUDA device to calibrate on: BACKEND_UNAVAILABLE/);
  });
});
