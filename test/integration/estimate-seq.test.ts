// `memlane estimate --seq / --shape` on a model with a symbolic sequence (a transformer
// exported with a dynamic seq), in a real CLI process: the model terms follow the sequence the
// benchmark will feed. The calibration is fitted from made-up probe figures and saved in a temp
// cache, so the command estimates at once (calibration itself: estimate.test.ts).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { calibrationKey, saveCalibration } from "../../src/estimate/cache.ts";
import { CALIBRATION_FORMAT, type Calibration, fitModels } from "../../src/estimate/calibration.ts";
import { evalChunks, replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { ortRunTracePerSample } from "../../src/estimate/ort-pattern.ts";
import { estimatePipeline } from "../../src/estimate/pipeline-estimate.ts";
import type { TorchCalibration } from "../../src/estimate/torch-calibration.ts";
import { pipeline } from "../../src/pipeline/builder.ts";
import { DYNAMIC_SEQ } from "../fixtures/ort-dynamic-seq.ts";
import { modelBytes } from "../unit/compiler-onnx-builder.ts";
import { startCli } from "./pipeline-helpers.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-estimate-seq-"));
const cache = path.join(dir, "cache");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function madeUpCalibration(): Calibration {
  const f = (w: number, cw: number, a: number, e: number, o = 0) => ({ weightMiB: w, convWeightMiB: cw, activationMiB: a, evalMiB: e, evalOutputMiB: o, heldMiB: 0, largestBatchMiB: 0, loadMiB: 0, nativeReleasedMiB: 0, deadOutputMiB: 0, outputBufferMiB: 0, nativeWorkspaceMiB: 0, ortFirstRequestMiB: 0, loadTransientMiB: 0, deadOutputKeptMiB: 0, firstRequestMiB: 0, mappedWeightMiB: 0, socketEvalMiB: 0 });
  const probes = [f(0, 0, 0, 0), f(48, 0, 0, 1), f(36, 36, 0, 1), f(0, 0, 32, 3), f(0, 0, 8, 128), f(16, 1, 8, 9)].map((x, i) => {
    const v = 60 + x.weightMiB + x.convWeightMiB + 2 * x.activationMiB + x.evalMiB;
    const phases = { "steady-inference": { rss: v, uss: v, pss: v, peak: v } };
    return { name: `p${i}`, features: { "python-ort": x }, phases: { "python-ort": phases } };
  });
  const prev = process.env.MEMLANE_CACHE_DIR;
  process.env.MEMLANE_CACHE_DIR = cache;
  try {
    const cal: Calibration = { format: CALIBRATION_FORMAT, key: calibrationKey(), createdAt: new Date().toISOString(), models: fitModels(probes), probes };
    saveCalibration(cal);
    return cal;
  } finally {
    if (prev === undefined) delete process.env.MEMLANE_CACHE_DIR;
    else process.env.MEMLANE_CACHE_DIR = prev;
  }
}

type Out = { run: { evalSamples: number }; terms: { ortPatternPerSampleMiB: number | null; ioPerSampleMiB: number | null }; runtimes: Array<{ runtime: string; features: { activationMiB: number } }> };

async function estimate(...flags: string[]): Promise<{ code: number | null; out: Out | null; stderr: string }> {
  const cli = startCli(["estimate", path.join(dir, "dyn.onnx"), "--runtimes", "python-ort", "--batch", "1,8", "--eval-samples", "16", "--json", ...flags], { MEMLANE_CACHE_DIR: cache });
  const { code } = await cli.exit;
  return { code, out: code === 0 ? (JSON.parse(cli.stdout()) as Out) : null, stderr: cli.stderr() };
}

/** A .safetensors file (as safetensors' save_file writes it) of x [3, 384, 32] zeros. */
function writeX384(): string {
  const header = Buffer.from(JSON.stringify({ x: { dtype: "F32", shape: [3, 384, 32], data_offsets: [0, 3 * 384 * 32 * 4] } }));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  const file = path.join(dir, "x384.safetensors");
  writeFileSync(file, Buffer.concat([len, header, Buffer.alloc(3 * 384 * 32 * 4)]));
  return file;
}

describe("memlane estimate on a model with a symbolic sequence", () => {
  it("predicts at --seq (default 128) and --shape, and refuses a --shape that does not fit", async () => {
    writeFileSync(path.join(dir, "dyn.onnx"), modelBytes(DYNAMIC_SEQ));
    madeUpCalibration();
    const MIB = 2 ** 20;
    // The replay: h (128 wide, Relu in place) and d (32 wide) a position.
    const perPosition = (128 + 32) * 4;
    const byDefault = await estimate();
    expect(byDefault.code, byDefault.stderr).toBe(0);
    expect(byDefault.stderr).not.toMatch(/calibrating/);
    expect(byDefault.out!.terms.ortPatternPerSampleMiB! * MIB).toBe(128 * perPosition);
    const seq16 = await estimate("--seq", "16");
    expect(seq16.out!.terms.ortPatternPerSampleMiB! * MIB).toBe(16 * perPosition);
    expect(seq16.out!.terms.ioPerSampleMiB! * MIB).toBe(2 * 16 * 32 * 4);
    // python-ort's activations: ORT's arena replayed at seq 16 over batch 1 then 8, then the
    // eval pass (16 samples by 8) keeping its outputs (ort-arena.ts).
    const trace = ortRunTracePerSample(loadOnnx(path.join(dir, "dyn.onnx")), { x: [-1, 16, 32] });
    const evalPass = { chunks: evalChunks(16, 8), holdOutputs: true };
    expect(seq16.out!.runtimes[0]!.features.activationMiB * MIB).toBe(replayOrtArena(trace, [1, 8], undefined, evalPass).residentBytes);
    expect(seq16.out!.terms).not.toHaveProperty("ortTracePerSample");
    const shaped = await estimate("--shape", "x=Nx40x32");
    expect(shaped.out!.terms.ortPatternPerSampleMiB! * MIB).toBe(40 * perPosition);
    const bad = await estimate("--shape", "x=Nx40x31");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--shape: input "x" dim 2 is fixed at 32/);
  }, 120_000);

  it("predicts at an --inputs file's shapes and rows", async () => {
    writeFileSync(path.join(dir, "dyn.onnx"), modelBytes(DYNAMIC_SEQ));
    madeUpCalibration();
    const MIB = 2 ** 20;
    const arrays = writeX384();
    const fed = await estimate("--inputs", arrays);
    expect(fed.code, fed.stderr).toBe(0);
    expect(fed.out!.terms.ortPatternPerSampleMiB! * MIB).toBe(384 * (128 + 32) * 4);
    expect(fed.out!.run.evalSamples).toBe(3);
    const missing = await estimate("--inputs", path.join(dir, "none.npz"));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--inputs/);
  }, 120_000);

  it("takes a pipeline's export stage inputs file: its shapes and its rows", async () => {
    writeFileSync(path.join(dir, "dyn.onnx"), modelBytes(DYNAMIC_SEQ));
    const cal = madeUpCalibration();
    const p = pipeline("fed", { batchSizes: [1, 8] }).export({ name: "e", onnx: path.join(dir, "dyn.onnx"), inputs: writeX384() }).benchmark("python-ort");
    // No stage here is python-torch's: its calibration is never read.
    const e = await estimatePipeline(p, cal, {} as TorchCalibration, 1e6);
    const bench = e.stages.find((x) => x.runtime === "python-ort")!;
    // ORT's arena at seq 384 replayed over batches 1, 8, then the eval pass over the file's 3 rows
    // keeping its outputs (ort-arena.ts); 3 rows of 384 × 32 floats in and out (not 256 at seq 128).
    const trace = ortRunTracePerSample(loadOnnx(path.join(dir, "dyn.onnx")), { x: [-1, 384, 32] });
    const arena = replayOrtArena(trace, [1, 8], undefined, { chunks: [3], holdOutputs: true }).residentBytes / 2 ** 20;
    const m = /activations ([\d.]+) MiB, eval set 0\.1 MiB in \+ 0\.1 MiB out/.exec(bench.parts);
    expect(m, bench.parts).not.toBeNull();
    // The estimate's replay starts in the arena room the load probe found unwritten (a float
    // model's: about 0.1 MiB, ort-load.ts untouchedMiB), which moves it by at most that.
    expect(Math.abs(Number(m![1]) - arena), bench.parts).toBeLessThanOrEqual(0.15);
  }, 120_000);

  it("refuses --seq, --shape and --inputs for a pipeline (its export stages say what they feed)", async () => {
    madeUpCalibration();
    const arrays = path.join(dir, "x384.safetensors");
    const pipe = path.join(dir, "p.ts");
    writeFileSync(pipe, "export default null;\n"); // refused before it is loaded
    for (const flag of [["--seq", "64"], ["--shape", "x=Nx64x32"], ["--inputs", arrays]]) {
      const cli = startCli(["estimate", pipe, ...flag], { MEMLANE_CACHE_DIR: cache });
      expect((await cli.exit).code, flag[0]).toBe(2);
      expect(cli.stderr()).toMatch(new RegExp(`${flag[0]}: for an ONNX file only; .*p\\.ts is a pipeline`));
    }
  }, 120_000);
});
