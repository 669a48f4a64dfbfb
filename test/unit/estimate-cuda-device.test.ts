// memlane-rt's device-memory estimate (src/estimate/cuda-device.ts) without a GPU: the
// allocations memlane_cuda_bench --budget reads from a real compiled plan (device_budget.h,
// what the backend allocates by), the formula over them, the stage lines of a real H200 run,
// and the calibration's refusal where no GPU answers.
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { mkdirSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx } from "../../src/compiler/index.ts";
import { calibrateCudaDevice, calibrateCudaDeviceOnProbe, calibrationFromProbes, compareDevice, cudaBenchBinary, deviceBudget, gpuHostKey, loadCudaDeviceCalibration, predictDevice, readStages, saveCudaDeviceCalibration } from "../../src/estimate/cuda-device.ts";
import { deviceEstimateCheck, ranOnCuda } from "../../src/estimate/report-device.ts";
import type { CudaDeviceCalibration } from "../../src/estimate/cuda-device.ts";
import { buildReport } from "../../src/report/build.ts";
import { estimatesMarkdown } from "../../src/report/estimates.ts";
import { buildCharts } from "../../src/report/html/index.ts";
import { renderMarkdown } from "../../src/report/markdown.ts";
import { validateReport } from "../../src/report/validate.ts";
import { realisticRun } from "./report-fixture.ts";
import type { Report, RuntimeReport } from "../../src/report/schema.ts";
import { ensureModels } from "../fixtures/onnx/models.ts";
import { init, node, writeModel } from "./compiler-onnx-builder.ts";

const MIB = 1024 * 1024;
const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-cuda-estimate-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const align = (x: number, a: number) => Math.ceil(x / a) * a;

describe.skipIf(!cudaBenchBinary())("CUDA device estimate (no GPU needed)", () => {
  const plan = path.join(dir, "resnet-mini.mlplan");
  let s: Awaited<ReturnType<typeof compileOnnx>>;
  beforeAll(async () => {
    const { dir: models, manifest } = ensureModels();
    s = await compileOnnx(path.join(models, manifest["resnet-mini"]!.onnx), plan);
  }, 120_000);

  it("reads the backend's allocations from a compiled plan, following the switches", () => {
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
    // weights 5 MiB + 1 B -> 6; per context 32 + 2 + 4 = 38 allocated + 60 fixed, twice. The
    // fp16 upload staging (3 MiB -> 4) is freed before any context allocates: no peak above the load.
    expect(e.parts).toEqual({ contextMiB: 500, weightsMiB: 6, perContextFixedMiB: 60, perContextAllocationsMiB: 38, contexts: 2, transientMiB: 0 });
    expect(e.loadMiB).toBe(500 + 6 + 2 * 98);
    expect(e.peakMiB).toBe(e.loadMiB);
    // Staging larger than what the contexts take later is the peak: context + weights + staging.
    const big = predictDevice({ ...b, uploadStagingBytes: 300 * MIB }, { contextMiB: 500, perContextMiB: 60, granuleMiB: 2 });
    expect(big.peakMiB).toBe(500 + 6 + 300);
    const per = predictDevice({ ...b, uploadStagingBytes: 0, perRequest: [{ name: "arena", bytes: 10 * MIB }, { name: "im2col", bytes: 0 }] }, { contextMiB: 500, perContextMiB: 60, granuleMiB: 2 });
    expect(per.peakMiB - per.loadMiB).toBe(2 * 10); // every context may run a request at once
  });

  it("reads the stage lines memlane_cuda_bench printed on an H200", () => {
    // As printed on 2026-12-04 (the fixture mlp plan, contexts=1), with the perProcess field the
    // stage lines carry since; a run of no requests prints non-JSON timings (-nan), skipped.
    const out = [
      '{"stage":"device","name":"NVIDIA H200","driver":13000,"runtime":13000,"totalBytes":150109880320}',
      '{"stage":"context","deviceUsedBytes":543162368,"perProcess":true,"weightBytesDevice":0,"arenaBytes":0,"workspaceBytes":0}',
      '{"stage":"prepared","deviceUsedBytes":650117120,"perProcess":true,"weightBytesDevice":69120,"arenaBytes":1024,"workspaceBytes":33554944}',
      '{"available":true,"batch":1,"iterations":0,"sync":{"p50":-1.0000,"p99":-1.0000,"throughputPerS":-nan}}',
    ].join("\n");
    expect(readStages(out)).toEqual({ device: { name: "NVIDIA H200", driver: 13000, runtime: 13000 }, contextBytes: 543162368, preparedBytes: 650117120, perProcess: true });
    // A device-wide reading (NVML could not name the process) is not one to calibrate on.
    expect(readStages(out.replace('"perProcess":true,"weightBytesDevice":69120', '"perProcess":false,"weightBytesDevice":69120')).perProcess).toBe(false);
    expect(readStages('{"available":false,"reason":"BACKEND_UNAVAILABLE: no CUDA driver"}').unavailable).toMatch(/no CUDA driver/);
    // The reading after the last batch, and the estimate against both readings.
    const run = `${out}\n{"available":true,"batch":8,"sync":{"p50":0.1,"throughputPerS":inf},"deviceUsedBytes":652214272,"arenaBytes":1024}`;
    expect(readStages(run).lastBatchBytes).toBe(652214272);
    const est = { loadMiB: 625, peakMiB: 625, parts: { contextMiB: 522, weightsMiB: 2, perContextFixedMiB: 58, perContextAllocationsMiB: 43, contexts: 1, transientMiB: 0 } };
    const c = compareDevice(est, readStages(run))!;
    expect(c.loadMiB).toBe(620);
    expect(c.endMiB).toBe(622);
    expect(c.loadErrPct).toBeCloseTo((5 / 620) * 100, 9);
    expect(c.endErrPct).toBeCloseTo((3 / 622) * 100, 9);
    expect(compareDevice(est, readStages(out))).toBeNull(); // no batch was run
  });

  it("calibrates from the H200's two probe loads: context 522 MiB, 58 a context", async () => {
    // Run 2 on 2026-12-04 loaded the fixture mlp plan with 1 and 2 contexts and read (NVML, per
    // process): 543162368 B before prepare, then 650117120 and 750780416 B after it.
    const { dir: models, manifest } = ensureModels();
    const mlp = path.join(dir, "mlp.mlplan");
    await compileOnnx(path.join(models, manifest["mlp"]!.onnx), mlp);
    const device = { name: "NVIDIA H200", driver: 13000, runtime: 13000 };
    const reading = (contexts: number, prepared: number) =>
      ({ contexts, budget: deviceBudget(mlp, 1, { contexts }), stages: { device, contextBytes: 543162368, preparedBytes: prepared, perProcess: true } });
    const cal = calibrationFromProbes([reading(1, 650117120), reading(2, 750780416)], "stamp", "host");
    expect(cal.contextMiB).toBeCloseTo(522, 6);
    expect(cal.perContextMiB).toBeCloseTo(58, 6);
    expect(cal.key).toEqual({ gpu: "NVIDIA H200", driver: 13000, runtime: 13000, binary: "stamp", host: "host" });
    // A second context that adds less than its own allocations, or a device-wide reading, is refused.
    expect(() => calibrationFromProbes([reading(1, 650117120), reading(2, 660000000)], "s", "h")).toThrow(/do not add up/);
    const wide = reading(2, 750780416);
    expect(() => calibrationFromProbes([reading(1, 650117120), { ...wide, stages: { ...wide.stages, perProcess: false } }], "s", "h")).toThrow(/device-wide/);
    expect(() => calibrationFromProbes([reading(1, 650117120)], "s", "h")).toThrow(/no device reading of the probe with 2 context/);
  });

  it("puts the estimate beside a CUDA run's GPU readings in the report, or says why there is none", () => {
    const cal: CudaDeviceCalibration = {
      format: 1, createdAt: "2026-12-04T00:00:00.000Z", contextMiB: 522, perContextMiB: 58, granuleMiB: 2, probes: [],
      key: { gpu: "NVIDIA H200", driver: 13000, runtime: 13000, binary: "stamp", host: "host" },
    };
    const phase = (name: string, gpuMiB: number | null, peakGpuMiB: number | null) => ({ name, gpuMiB, peakGpuMiB });
    const row = { name: "native", device: "cuda", phases: [phase("import", null, null), phase("model-load", 640, 650), phase("first-inference", 644, 646), phase("steady-inference", 646, 648)] } as unknown as RuntimeReport;
    const c = deviceEstimateCheck("bench-native", row, plan, 16, cudaBenchBinary(), cal);
    const e = predictDevice(deviceBudget(plan, 16), cal);
    expect(c.estimate).toEqual(e);
    expect(c.reason).toBeNull();
    expect(c.measured).toEqual({ loadMiB: 640, endMiB: 646, peakMiB: 650 });
    expect(c.loadErrorPct).toBeCloseTo(((e.loadMiB - 640) / 640) * 100, 9);
    expect(c.endErrorPct).toBeCloseTo(((e.loadMiB - 646) / 646) * 100, 9);
    expect(c.peakErrorPct).toBeCloseTo(((e.peakMiB - 650) / 650) * 100, 9);
    expect(c.calibration).toMatch(/NVIDIA H200, driver 13000/);
    // Without this GPU's calibration, or without the CUDA build: the readings, no number.
    const none = deviceEstimateCheck("bench-native", row, plan, 16, cudaBenchBinary(), null);
    expect(none.estimate).toBeNull();
    expect(none.reason).toMatch(/no device calibration of this GPU is cached: run `memlane estimate <model.onnx> --device cuda`/);
    expect([none.loadErrorPct, none.endErrorPct, none.peakErrorPct]).toEqual([null, null, null]);
    expect(none.measured.loadMiB).toBe(640);
    expect(deviceEstimateCheck("bench-native", row, plan, 16, null, cal).reason).toMatch(/built without nvcc/);
    // A plan the backend refuses: its reason.
    expect(deviceEstimateCheck("bench-native", row, path.join(dir, "missing.mlplan"), 16, cudaBenchBinary(), cal).reason).toMatch(/missing\.mlplan/);
    expect(ranOnCuda(row)).toBe(true);
    expect(ranOnCuda({ device: "cuda:1" })).toBe(true);
    expect(ranOnCuda({ device: "cpu" })).toBe(false);
    // report.md's table and the report's validation.
    const estimates = { status: "ok" as const, reason: null, calibratedAt: null, naiveMiB: null, runtimes: [], device: [c, none] };
    const md = estimatesMarkdown({ estimates } as unknown as Report)!;
    expect(md).toContain(`| native (bench-native) | 16 | ${e.loadMiB.toFixed(2)} | 640.00 | ${c.loadErrorPct! > 0 ? "+" : ""}${c.loadErrorPct!.toFixed(1)} % |`);
    expect(md).toMatch(/unavailable: no device calibration/);
    const report = buildReport(realisticRun());
    expect(validateReport({ ...report, estimates })).toEqual([]);
    expect(validateReport({ ...report, estimates: { ...estimates, device: [{ ...c, maxBatch: "16" }] } }).join("\n")).toMatch(/report\.estimates\.device\[0\]\.maxBatch/);
    expect(renderMarkdown({ ...report, estimates })).toContain("Device memory (CUDA, this process's GPU MiB");
    const chart = buildCharts({ ...report, estimates }).find((x) => x.id === "estimate-vs-measured-device")!;
    expect(chart.labels).toEqual(["native (bench-native)"]); // the row without an estimate has no bars
    expect(chart.series.find((x) => x.name === "measured after the load")!.data).toEqual([640]);
  });

  it.skipIf(existsSync("/dev/nvidiactl"))("refuses to calibrate where no GPU answers, saying why", async () => {
    expect(() => calibrateCudaDevice(plan)).toThrow(/no CUDA device to calibrate on: BACKEND_UNAVAILABLE/);
    await expect(calibrateCudaDeviceOnProbe()).rejects.toThrow(/no CUDA device to calibrate on/);
  });

  it("gives no budget for a plan the CUDA backend would refuse at load, saying why", async () => {
    // Integers carried through float32 and cast back: exact in fp32, refused in fp16 (half
    // holds integers exactly only up to 2048), as prepare() refuses it.
    const onnx = writeModel({
      inputs: [["ids", ["batch", 4], 7]], outputs: ["out"], inits: [init("two", [1], [2])],
      nodes: [node("Cast", ["ids"], ["f"], { to: 1 }), node("Mul", ["f", "two"], ["g"]), node("Cast", ["g"], ["out"], { to: 7 })],
    }, "int-through-float", dir);
    const intPlan = path.join(dir, "int-through-float.mlplan");
    await compileOnnx(onnx, intPlan);
    expect(deviceBudget(intPlan, 4).perContext.map((a) => a.name)).toContain("arena");
    expect(() => deviceBudget(intPlan, 4, { fp16: true })).toThrow(/memlane_cuda_bench --budget .*Cast/);
    expect(() => deviceBudget(plan, 0)).toThrow(/--batches: expected batch sizes >= 1/);
  });

  it("keeps a cached calibration only for the binary, driver and GPUs it was made with", () => {
    const root = path.join(dir, "proc-nvidia");
    mkdirSync(path.join(root, "gpus", "0000:01:00.0"), { recursive: true });
    writeFileSync(path.join(root, "version"), "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04\nGCC version: 13\n");
    writeFileSync(path.join(root, "gpus", "0000:01:00.0", "information"), "Model: \t\t NVIDIA H200\nIRQ: 42\n");
    const host = gpuHostKey(root);
    expect(host).toBe("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04; 0000:01:00.0 NVIDIA H200");
    expect(gpuHostKey(path.join(dir, "no-driver"))).toBe("");
    const binary = cudaBenchBinary()!;
    const st = statSync(binary);
    const cal = { format: 1, key: { gpu: "NVIDIA H200", driver: 13000, runtime: 13000, binary: `${st.size}-${Math.round(st.mtimeMs)}`, host },
      createdAt: "2026-12-04T00:00:00Z", contextMiB: 522, perContextMiB: 58, granuleMiB: 2, probes: [] };
    const file = saveCudaDeviceCalibration(cal, path.join(dir, "cache", "cuda-device-calibration.json"));
    expect(loadCudaDeviceCalibration(binary, file, host)).toEqual(cal);
    expect(loadCudaDeviceCalibration(binary, file, `${host} (another driver)`)).toBeNull();
    writeFileSync(file, JSON.stringify({ ...cal, key: { ...cal.key, binary: "1-2" } }));
    expect(loadCudaDeviceCalibration(binary, file, host)).toBeNull();
  });
});
