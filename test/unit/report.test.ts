import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildReport } from "../../src/report/build.ts";
import { ratio } from "../../src/report/comparison.ts";
import { REPORT_SCHEMA_VERSION, type Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";
import { stringifyReport, writeReport } from "../../src/report/write.ts";
import { NATIVE_NOTES, pipelinedRun, realisticRun, T0 } from "./report-fixture.ts";

const report = buildReport(realisticRun());
const rt = (name: string) => report.runtimes.find((r) => r.name === name)!;
const phase = (name: string, p: string) => rt(name).phases.find((x) => x.name === p)!;

describe("buildReport", () => {
  it("carries the required top-level shape", () => {
    expect(report).toMatchObject({ schemaVersion: REPORT_SCHEMA_VERSION, pipeline: "digits", runId: "20261121-193000-digits" });
    expect(report.training).toMatchObject({ accuracy: 0.9694, epochs: 2, pid: 4100 });
    expect(report.training!.phases.map((p) => p.name)).toEqual(["import", "data-load", "epoch-1", "epoch-2", "checkpoint-save"]);
    expect(report.runtimes.map((r) => [r.name, r.pid, r.process.kind])).toEqual([
      ["python-torch", 4101, "python"], ["python-ort", 4102, "python"], ["node-ort", 4000, "node"], ["native", 4103, "memlane-rt"],
    ]);
  });

  it("converts phase figures to MiB: end reading, increment, peak and its source", () => {
    expect(phase("python-ort", "model-load")).toMatchObject({
      rssMiB: 65, ussMiB: 47, deltaRssMiB: 2, deltaUssMiB: 2, peakRssMiB: 68.5, peakSource: "hwm", ms: 8, swapMiB: 0,
    });
    // The spike only the sampler saw.
    expect(phase("python-ort", "first-inference")).toMatchObject({ peakRssMiB: 80, peakSource: "sample", samples: 2 });
    expect(phase("native", "first-inference")).toMatchObject({ deltaRssMiB: 0.25, deltaUssMiB: 0.75, peakSource: "end" });
    const p = phase("python-torch", "import");
    expect(p.endMs - p.startMs).toBe(p.ms);
    expect(p.startMs).toBeGreaterThan(T0);
  });

  it("marks GPU figures unavailable (null, never 0) without a GPU", () => {
    for (const r of report.runtimes) {
      expect(r.steady.gpuMiB).toBeNull();
      for (const p of r.phases) expect([p.gpu, p.gpuMiB, p.deltaGpuMiB, p.peakGpuMiB]).toEqual(["unavailable", null, null, null]);
    }
    expect(report.gpu).toEqual({ status: "unavailable", reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)", devices: [] });
  });

  it("reports malloc's free bytes where the worker sent mallinfo2 figures, null (never 0) where it did not", () => {
    const run = realisticRun();
    const ort = run.runtimes.find((r) => r.name === "python-ort")!;
    for (const m of ort.marks) {
      const load = m.name === "model-load" && m.mark === "end";
      Object.assign(m.memory, { mallocFreeKiB: load ? 100 * 1024 : 2 * 1024, mallocInUseKiB: 30 * 1024 });
    }
    const built = buildReport(run);
    const p = (name: string) => built.runtimes.find((r) => r.name === "python-ort")!.phases.find((x) => x.name === name)!;
    expect(p("model-load")).toMatchObject({ mallocFreeMiB: 100, deltaMallocFreeMiB: 98, mallocInUseMiB: 30 });
    expect(p("first-inference")).toMatchObject({ mallocFreeMiB: 2, deltaMallocFreeMiB: 0 });
    for (const ph of built.runtimes.find((r) => r.name === "native")!.phases)
      expect([ph.mallocFreeMiB, ph.deltaMallocFreeMiB, ph.mallocInUseMiB]).toEqual([null, null, null]);
    expect(validateReport(JSON.parse(stringifyReport(built)))).toEqual([]);
  });

  it("takes steady memory from the end of steady-inference", () => {
    expect(rt("python-ort").steady).toEqual({ rssMiB: 75, ussMiB: 50, pssMiB: 56.25, gpuMiB: null });
    expect(rt("native").steady).toEqual({ rssMiB: 4, ussMiB: 2.5, pssMiB: 2.88, gpuMiB: null });
  });

  it("reports checkpoint loads from their model-load phase", () => {
    expect(report.checkpointLoad).toEqual([
      { method: "torch.load", pid: 4201, fileMiB: 3.12, deltaRssMiB: 3, deltaUssMiB: 2.9, peakRssMiB: 316, ms: 20, peakDeltaRssMiB: 6, firstInferenceDeltaRssMiB: null },
      { method: "torch.load-mmap", pid: 4202, fileMiB: 3.12, deltaRssMiB: 0.3, deltaUssMiB: 0.1, peakRssMiB: 310.6, ms: 20, peakDeltaRssMiB: 0.6, firstInferenceDeltaRssMiB: null },
      { method: "safetensors", pid: 4203, fileMiB: 3.12, deltaRssMiB: 0.2, deltaUssMiB: 0.1, peakRssMiB: 310.4, ms: 20, peakDeltaRssMiB: 0.4, firstInferenceDeltaRssMiB: null },
    ]);
  });

  it("compares runtimes side by side, with every non-Python runtime over every Python one", () => {
    const c = report.comparison;
    expect(c.steady.map((s) => [s.runtime, s.ussMiB])).toEqual([["python-torch", 271], ["python-ort", 50], ["node-ort", 67], ["native", 2.5]]);
    expect(c.phases.map((p) => p.phase)).toEqual(["import", "runtime-create", "model-load", "first-inference", "steady-inference"]);
    const imp = c.phases[0]!.byRuntime;
    expect(imp["native"]).toBeNull();
    expect(imp["python-torch"]).toEqual({ deltaRssMiB: 297, deltaUssMiB: 247, peakRssMiB: 312, ms: 900 });
    expect(c.ratios).toHaveLength(2 * 2 * 5);
    const get = (n: string, d: string, k: string) => c.ratios.find((r) => r.numerator === n && r.denominator === d && r.counter === k)?.value;
    expect(get("native", "python-ort", "steady.ussMiB")).toBe(0.05);
    expect(get("native", "python-ort", "steady.rssMiB")).toBe(0.053);
    expect(get("node-ort", "python-ort", "steady.ussMiB")).toBe(1.34);
    expect(get("native", "python-torch", "latencyMs.batch1.p50")).toBe(0.085);
    expect(c.ratios.some((r) => r.numerator.startsWith("python"))).toBe(false);
  });

  it("writes pipelined samples/s and backend notes as null for every runtime that measured none (all on the CPU)", () => {
    for (const r of report.runtimes) expect([r.name, r.pipelinedThroughputPerS, r.backendNotes]).toEqual([r.name, null, null]);
    for (const r of report.runtimes) for (const v of Object.values(r.latencyMs)) expect(v).not.toHaveProperty("pipelinedMean");
  });

  it("carries memlane-rt's pipelined figures and backend notes; empty notes and non-finite figures become null", () => {
    const p = buildReport(pipelinedRun());
    const native = p.runtimes.find((r) => r.name === "native")!;
    expect(native).toMatchObject({ device: "cuda:0", pipelinedThroughputPerS: 300_047, backendNotes: NATIVE_NOTES });
    expect(native.latencyMs["batch64"]).toEqual({ p50: 0.52, p99: 0.8, mean: 0.55, pipelinedMean: 0.2133 });
    expect(p.runtimes.filter((r) => r.name !== "native").map((r) => [r.pipelinedThroughputPerS, r.backendNotes])).toEqual([[null, null], [null, null], [null, null]]);
    const run = pipelinedRun();
    const rec = run.runtimes.find((r) => r.name === "native")!;
    rec.backendNotes = "  ";
    rec.pipelinedThroughputPerS = Number.NaN;
    expect(buildReport(run).runtimes.find((r) => r.name === "native")).toMatchObject({ pipelinedThroughputPerS: null, backendNotes: null });
  });

  it("ratio is null for unknown figures or a zero denominator", () => {
    expect(ratio(1, 0)).toBeNull();
    expect(ratio(null, 3)).toBeNull();
    expect(ratio(1, 3)).toBe(0.333);
  });

  it("names the numerics reference and lists every runtime", () => {
    expect(report.numerics.reference).toBe("python-torch");
    expect(report.numerics.runtimes[3]).toEqual({ name: "native", maxAbsDiff: 3.1e-6, accuracy: 0.9722 });
  });

  it("exports each tracked process's samples as [tMs, rssKiB, ussKiB, gpuKiB] tuples", () => {
    const t = report.timeline.find((x) => x.label === "python-ort")!;
    expect(t).toMatchObject({ pid: 4102, periodMs: 50 });
    expect(t.samples).toHaveLength(6);
    expect(t.samples.some(([, rss, uss, gpu]) => rss === 80 * 1024 && uss === 56 * 1024 && gpu === null)).toBe(true);
  });

  it("handles a pipeline without training; a runtime without phases gets steady memory from its last sample", () => {
    const run = realisticRun();
    expect(buildReport({ ...run, training: null }).training).toBeNull();
    const noPhases = { ...run, runtimes: [{ ...run.runtimes[0]!, marks: run.runtimes[0]!.marks.filter((m) => m.mark === "start") }] };
    const r = buildReport(noPhases).runtimes[0]!;
    expect(r.phases).toEqual([]);
    expect(r.steady).toEqual({ rssMiB: 331, ussMiB: 271, pssMiB: 286, gpuMiB: null });
    expect(() => buildReport({ ...noPhases, tracks: [] })).toThrow(/runtime "python-torch" has no completed phase and no sample/);
  });
});

describe("validateReport", () => {
  it("accepts a built report after a JSON round trip", () => {
    expect(validateReport(JSON.parse(stringifyReport(report)))).toEqual([]);
  });
  it("names missing and mistyped fields, and a 0 where GPU is unavailable", () => {
    const bad = JSON.parse(JSON.stringify(report)) as Record<string, any>;
    delete bad["runId"];
    bad["runtimes"][1].phases[2].peakRssMiB = "68.5";
    bad["runtimes"][0].phases[0].gpuMiB = 0;
    delete bad["runtimes"][3].latencyMs.batch64.p99;
    bad["timeline"][0].samples[0] = [1, 2, 3];
    expect(validateReport(bad)).toEqual([
      "report.runId: missing (expected string)",
      "report.runtimes[0].phases[0].gpuMiB: expected null when gpu is \"unavailable\", received 0",
      "report.runtimes[1].phases[2].peakRssMiB: expected number, received string",
      "report.runtimes[3].latencyMs.batch64.p99: missing (expected number)",
      "report.timeline[0].samples[0]: expected [tMs, rssKiB, ussKiB|null, gpuKiB|null], received [1,2,3]",
    ]);
  });
  it("accepts pipelined figures and backend notes, and names a wrong type with its path", () => {
    const p = JSON.parse(stringifyReport(buildReport(pipelinedRun()))) as Record<string, any>;
    expect(validateReport(p)).toEqual([]);
    p["runtimes"][3].pipelinedThroughputPerS = "fast";
    p["runtimes"][3].backendNotes = 3;
    p["runtimes"][3].latencyMs.batch1.pipelinedMean = null;
    expect(validateReport(p)).toEqual([
      "report.runtimes[3].pipelinedThroughputPerS: expected number|null, received string",
      "report.runtimes[3].backendNotes: expected string|null, received number",
      "report.runtimes[3].latencyMs.batch1.pipelinedMean: expected number, received null",
    ]);
  });
  it("still accepts a schema-v1 report written before pipelinedThroughputPerS and backendNotes existed", () => {
    const old = JSON.parse(stringifyReport(report)) as Record<string, any>;
    for (const r of old["runtimes"]) {
      delete r.pipelinedThroughputPerS;
      delete r.backendNotes;
    }
    expect(old["schemaVersion"]).toBe(1);
    expect(validateReport(old)).toEqual([]);
  });
});

describe("writeReport", () => {
  const dir = mkdtempSync(join(tmpdir(), "memlane-report-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("writes report.json and report.md under runs/<runId>/, atomically", async () => {
    const out = await writeReport(report, dir);
    expect(out.dir).toBe(join(dir, report.runId));
    expect(readdirSync(out.dir).sort()).toEqual(["report.json", "report.md"]);
    const text = readFileSync(out.json, "utf8");
    const parsed = JSON.parse(text) as Report;
    expect(validateReport(parsed)).toEqual([]);
    expect(parsed.comparison).toEqual(report.comparison);
    // Samples stay one per line.
    expect(text).toMatch(/\[\d+, 81920, 57344, null\]/);
    expect(readFileSync(out.markdown, "utf8")).toMatch(/^# memlane report: digits/);
    await writeReport(report, dir); // overwriting leaves no temp file behind
    expect(readdirSync(out.dir).sort()).toEqual(["report.json", "report.md"]);
  });

  it("refuses a runId that is not a plain directory name", async () => {
    await expect(writeReport({ ...report, runId: "../x" }, dir)).rejects.toThrow(/runId must be a plain directory name.*"\.\.\/x"/);
  });
});

describe("gpuReport", () => {
  it("maps the sampler's GPU status to the report section", async () => {
    const { gpuReport } = await import("../../src/report/build.ts");
    const { MemorySampler } = await import("../../src/memory/sampler.ts");
    expect(gpuReport(new MemorySampler().gpuStatus())).toEqual({ status: "unavailable", reason: "no GPU probe configured", devices: [] });
    const dev = { index: 0, name: "NVIDIA H100 80GB HBM3", totalMiB: 81559, usedMiB: 512, driver: "550.54" };
    expect(gpuReport({ ok: true }, [dev])).toEqual({ status: "available", reason: null, devices: [dev] });
  });
});
