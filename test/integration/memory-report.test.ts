// From a real measured process to report.json: the alloc fixture plays a runtime whose phases
// allocate known amounts; the sampler tracks it; the report built from the marks and samples
// validates, and its figures are the measured ones.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AllocProcess, outsideMark } from "../fixtures/alloc/alloc-process.ts";
import { MemorySampler } from "../../src/memory/sampler.ts";
import { PhaseRecorder, type PhaseMarkInput } from "../../src/memory/phases.ts";
import { buildReport, gpuReport } from "../../src/report/build.ts";
import { renderTerminal } from "../../src/report/terminal.ts";
import { validateReport } from "../../src/report/validate.ts";
import { writeReport } from "../../src/report/write.ts";
import type { Report } from "../../src/report/schema.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const near = (actual: number, expected: number, tol = 0.02) =>
  expect(Math.abs(actual - expected), `${actual} vs ${expected}`).toBeLessThanOrEqual(expected * tol);

describe("report from a real run", () => {
  const dir = mkdtempSync(join(tmpdir(), "memlane-runs-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("measures a fixture 'runtime' and the orchestrator's own phases into a valid report", async () => {
    const sampler = new MemorySampler({ periodMs: 20 });
    sampler.start();
    const proc = await AllocProcess.start();
    sampler.track(proc.pid, "fixture");
    sampler.track(process.pid, "node-ort");
    const marks: PhaseMarkInput[] = [];
    const phase = async (name: string, cmd: string) => {
      marks.push(await outsideMark(proc.pid, name, "start"));
      await proc.send(cmd);
      await sleep(80);
      marks.push(await outsideMark(proc.pid, name, "end"));
    };
    const stageStart = Date.now();
    await phase("runtime-create", "alloc 16");
    await phase("model-load", "alloc 48");
    await phase("first-inference", "spike 96 150");
    await phase("steady-inference", "alloc 8");

    const rec = new PhaseRecorder();
    let held: Buffer | null = null;
    await rec.measure("model-load", async () => {
      held = Buffer.allocUnsafe(32 * 2 ** 20).fill(1);
      await sleep(60);
    });
    await rec.measure("steady-inference", () => sleep(60));
    await sampler.stop();
    proc.dispose();

    const common = { device: "cpu", versions: {}, accuracy: null, maxAbsDiff: null, throughputPerS: 1000,
      latencyMs: { batch1: { p50: 0.5, p99: 0.9, mean: 0.6 } } };
    const report = buildReport({
      pipeline: "fixture", runId: "it-memory-report", training: null,
      runtimes: [
        { ...common, name: "fixture", process: { pid: proc.pid, kind: "memlane-rt", command: ["alloc"] }, marks },
        { ...common, name: "node-ort", process: { pid: process.pid, kind: "node", command: process.argv }, marks: rec.marks },
      ],
      tracks: sampler.snapshot(),
      stages: [{ name: "fixture", kind: "inline", worker: "fixture", pid: proc.pid, startMs: stageStart, endMs: Date.now(), status: "ok" }],
      gpu: gpuReport(sampler.gpuStatus()),
    });
    expect(held).not.toBeNull();

    const fx = report.runtimes[0]!;
    const byName = Object.fromEntries(fx.phases.map((p) => [p.name, p]));
    near(byName["runtime-create"]!.deltaRssMiB, 16);
    near(byName["model-load"]!.deltaUssMiB, 48);
    near(byName["first-inference"]!.peakRssMiB - (byName["model-load"]!.rssMiB), 96);
    expect(Math.abs(byName["first-inference"]!.deltaRssMiB)).toBeLessThan(1);
    near(byName["steady-inference"]!.deltaRssMiB, 8);
    expect(fx.phases.every((p) => p.samples >= 2)).toBe(true);
    expect(report.runtimes[1]!.phases[0]!.deltaRssMiB).toBeGreaterThan(28);
    expect(report.gpu.status).toBe("unavailable");
    expect(report.comparison.ratios).toEqual([]); // no Python runtime to compare with
    expect(report.timeline.find((t) => t.pid === proc.pid)!.samples.length).toBeGreaterThan(10);

    const out = await writeReport(report, dir);
    const parsed = JSON.parse(readFileSync(out.json, "utf8")) as Report;
    expect(validateReport(parsed)).toEqual([]);
    const term = renderTerminal(parsed);
    expect(term).toMatch(/^fixture\s+\d+\.\d\d\s+\d+\.\d\d\s+0\.500\s+0\.900/m);
  });
});
