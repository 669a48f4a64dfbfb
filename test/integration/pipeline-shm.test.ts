/**
 * A real pipeline (pipelines/resnet-mini.ts: 128 × 3×32×32 float32 eval inputs = 1.5 MiB)
 * sends its inputs to the Python runtimes and memlane-rt through shared memory, and the outputs are
 * byte-identical to a run that sends frames only; no segment of either run is left.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runPipeline } from "../../src/pipeline/run.ts";
import { ROOT } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-pipeline-shm-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const ready = existsSync(path.join(ROOT, ".venv/bin/python")) && existsSync("/dev/shm");

describe.skipIf(!ready)("pipeline: eval inputs over 1 MiB go through shared memory", () => {
  it("resnet-mini: python runtimes and memlane-rt get /dev/shm, outputs equal the frame path, nothing left", { timeout: 240_000 }, async () => {
    const p = (await import("../../pipelines/resnet-mini.ts")).default;
    const viaShm = await runPipeline(p, { outDir: out, quiet: true });
    const viaFrames = await runPipeline(p, { outDir: out, quiet: true, sharedMemory: false });
    const left = readdirSync("/dev/shm").filter((n) => n.startsWith(`memlane-${process.pid}-`));
    expect(left).toEqual([]);
    // python-torch, python-ort and memlane-rt say `shm` in their hello: each maps the one
    // run-long 1.5 MiB segment the eval set was written into (node-ort runs in the
    // orchestrator's own process and needs none).
    const native = viaShm.report.runtimes.some((r) => r.name === "native");
    expect(viaShm.table).toMatch(native
      ? /shared memory: 3 input tensor\(s\), 4\.50 MiB, mapped from \/dev\/shm .*; 1 segment\(s\) of 1\.50 MiB/
      : /shared memory: 2 input tensor\(s\), 3\.00 MiB, mapped from \/dev\/shm .*; 1 segment\(s\) of 1\.50 MiB/);
    expect(viaFrames.table).not.toMatch(/shared memory:/);
    const runtimes = viaShm.report.runtimes.map((r) => r.name);
    expect(runtimes).toEqual(expect.arrayContaining(["python-torch", "python-ort", "node-ort"]));
    for (const rt of runtimes) {
      const a = readFileSync(path.join(viaShm.runDir, `outputs-${rt}.f32`));
      const b = readFileSync(path.join(viaFrames.runDir, `outputs-${rt}.f32`));
      expect(a.length, rt).toBe(128 * 10 * 4);
      expect(a.equals(b), `${rt}: shm and frame outputs byte-identical`).toBe(true);
    }
  });
});
