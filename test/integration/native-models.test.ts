/**
 * memlane-rt against ONNX Runtime on real exported models: every fixture model that the
 * compiler turns into a plan (test/fixtures/onnx/make_models.py) runs through `load` + `run`
 * over real ZeroMQ (the supervisor), and its outputs match onnxruntime-node within 1e-4.
 * `infer.native` is checked for its phases, latency table and eval-set outputs.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompileError, compileOnnx } from "../../src/compiler/index.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { workerSpecs } from "../../src/workers/specs.ts";
import { rtBuilt } from "../fixtures/rt-built.ts";
import type { WorkerHandle } from "../../src/workers/handle.ts";
import { type ModelEntry, ensureModels } from "../fixtures/onnx/models.ts";
import { ortSession } from "../fixtures/ort-session.ts";

const BUILT = rtBuilt("native-models");

const TOL = 1e-4;
/** The models the latency targets name: they must compile and match. */
const CORE = ["digits-cnn", "mlp", "resnet-mini"];
let dir = "";
let manifest: Record<string, ModelEntry> = {};
let sup: Supervisor;
let worker: WorkerHandle;
const out = mkdtempSync(join(tmpdir(), "memlane-native-models-"));

/** Deterministic inputs in [-1, 1). */
function inputs(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    a[i] = (s / 2 ** 32) * 2 - 1;
  }
  return a;
}

function readF32(path: string): Float32Array {
  const b = readFileSync(path);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

async function ortRun(onnx: string, x: Float32Array, shape: number[]): Promise<Float32Array> {
  const s = await ortSession(onnx, { intraOpNumThreads: 1 });
  try {
    const r = await s.run({ [s.inputNames[0]!]: new ort.Tensor("float32", x, shape) });
    return r[s.outputNames[0]!]!.data as Float32Array;
  } finally {
    await s.release();
  }
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= m)) m = d;
  }
  return m;
}

const compiled = (): string[] => Object.keys(manifest).filter((k) => manifest[k]!.compiles);

describe.skipIf(!BUILT)("memlane-rt vs ONNX Runtime on exported models", () => {
  beforeAll(async () => {
    ({ dir, manifest } = ensureModels());
    sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 500 } });
    worker = await sup.spawn(workerSpecs.memlaneRt({ args: ["--device", "cpu", "--threads", "1"] }));
  }, 300_000);
  afterAll(async () => {
    await sup?.close();
    rmSync(out, { recursive: true, force: true });
  });

  it("says hello as memlane-rt with its versions", () => {
    expect(worker.hello.worker).toBe("memlane-rt");
    expect(worker.hello.capabilities).toEqual(["infer.native", "load", "run", "shm"]);
    expect(worker.hello.versions.protocol).toBe("1");
    expect(worker.hello.versions.openblas).toMatch(/OpenBLAS/);
    expect(worker.hello.versions.zmq).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("every compiled fixture model matches ONNX Runtime within 1e-4 (batches 1, 2 and 5)", async () => {
    const names = compiled();
    expect(names.length).toBeGreaterThanOrEqual(10);
    const diffs: Record<string, number> = {};
    const notCompiled: string[] = [];
    for (const name of names) {
      const m = manifest[name]!;
      const onnx = join(dir, m.onnx);
      const plan = join(out, `${name}.mlplan`);
      try {
        await compileOnnx(onnx, plan);
      } catch (err) {
        // The compiler's vocabulary is its own suite's business; the core models must compile.
        if (!(err instanceof CompileError) || CORE.includes(name)) throw err;
        notCompiled.push(name);
        continue;
      }
      const loaded = await worker.run("load", { model: plan, maxBatch: 8, device: "cpu" });
      expect(loaded.value.device).toBe("cpu");
      expect(loaded.value.arenaBytes as number).toBeGreaterThan(0);
      const inName = (loaded.value.inputs as { name: string }[])[0]!.name;
      const per = m.inputShape.slice(1).reduce((a, d) => a * d, 1);
      let worst = 0;
      for (const n of [1, 2, 5]) {
        const shape = [n, ...m.inputShape.slice(1)];
        const x = n === 2 && m.input ? readF32(join(dir, m.input)) : inputs(n * per, n * 7919 + name.length);
        const r = await worker.run("run", {}, { tensors: { [inName]: { dtype: "float32", shape, data: x } } });
        const got = Object.values(r.tensors)[0]!;
        expect(got.shape[0]).toBe(n);
        const want = await ortRun(onnx, x, shape);
        worst = Math.max(worst, maxAbsDiff(got.data as Float32Array, want));
      }
      diffs[name] = worst;
    }
    if (notCompiled.length) console.warn(`native-models: not compiled (compiler CompileError): ${notCompiled.join(", ")}`);
    for (const name of CORE) expect(Object.keys(diffs)).toContain(name);
    for (const [name, d] of Object.entries(diffs)) expect(d, `${name}: max abs diff ${d}`).toBeLessThanOrEqual(TOL);
  });

  it("infer.native: phases in order, latency per batch size, outputs for the whole eval set", async () => {
    const m = manifest["digits-cnn"]!;
    const onnx = join(dir, m.onnx);
    const plan = join(out, "digits-infer.mlplan");
    await compileOnnx(onnx, plan);
    const N = 70; // not a multiple of the largest batch: the last chunk is partial
    const x = inputs(N * 64, 42);
    const r = await worker.run(
      "infer.native",
      { model: plan, batchSizes: [1, 16], iterations: 5, warmup: 1, threads: 1 },
      { tensors: { inputs: { dtype: "float32", shape: [N, 1, 8, 8], data: x } } },
    );
    const names = r.phases.map((p) => `${p.name}:${p.mark}`);
    expect(names).toEqual([
      "import:start", "import:end", "runtime-create:start", "runtime-create:end", "model-load:start", "model-load:end",
      "first-inference:start", "first-inference:end", "steady-inference:start", "steady-inference:end",
    ]);
    for (const p of r.phases) {
      expect(p.memory.rssKiB).toBeGreaterThanOrEqual(0);
      expect(typeof p.tMs).toBe("number");
    }
    const end = r.phases.find((p) => p.name === "steady-inference" && p.mark === "end")!;
    expect(end.memory.rssKiB).toBeGreaterThan(1000);
    expect(end.memory.rssKiB).toBeLessThan(512 * 1024); // the point: well under 0.5 GB
    const lat = r.value.latencyMs as Record<string, { p50: number; p99: number; mean: number }>;
    expect(Object.keys(lat)).toEqual(["batch1", "batch16"]);
    for (const row of Object.values(lat)) {
      expect(row.p50).toBeGreaterThan(0);
      expect(row.p99).toBeGreaterThanOrEqual(row.p50);
    }
    expect(r.value.throughputPerS as number).toBeGreaterThan(0);
    expect(r.value.device).toBe("cpu");
    // The CPU backend computes on the caller's thread: one request in flight, so no
    // pipelined figures unless asked for (next test).
    expect(r.value.maxInFlight).toBe(1);
    expect(r.value.pipelinedThroughputPerS).toBeNull();
    for (const row of Object.values(lat)) expect(row).not.toHaveProperty("pipelinedMean");
    expect(typeof r.value.backendNotes).toBe("string");
    const outputs = r.tensors.outputs!;
    expect(outputs.dtype).toBe("float32");
    expect(outputs.shape).toEqual([N, 10]);
    expect(maxAbsDiff(outputs.data as Float32Array, await ortRun(onnx, x, [N, 1, 8, 8]))).toBeLessThanOrEqual(TOL);
  });

  it("infer.native pipelined: requests submitted back to back then drained, timed per request; a non-boolean is refused", async () => {
    const m = manifest["digits-cnn"]!;
    const onnx = join(dir, m.onnx);
    const plan = join(out, "digits-pipelined.mlplan");
    await compileOnnx(onnx, plan);
    const N = 33;
    const x = inputs(N * 64, 7);
    const tensors = { inputs: { dtype: "float32" as const, shape: [N, 1, 8, 8], data: x } };
    const r = await worker.run("infer.native", { model: plan, batchSizes: [1, 8], iterations: 6, warmup: 1, threads: 1, pipelined: true }, { tensors });
    const lat = r.value.latencyMs as Record<string, { p50: number; pipelinedMean: number }>;
    for (const row of Object.values(lat)) expect(row.pipelinedMean).toBeGreaterThan(0);
    // throughput at the largest batch from the pipelined mean: 8 samples per request
    expect(r.value.pipelinedThroughputPerS as number).toBeCloseTo((8 * 1000) / lat.batch8!.pipelinedMean, 6);
    expect(maxAbsDiff(r.tensors.outputs!.data as Float32Array, await ortRun(onnx, x, [N, 1, 8, 8]))).toBeLessThanOrEqual(TOL);
    await expect(worker.run("infer.native", { model: plan, batchSizes: [1], iterations: 1, pipelined: "yes" }, { tensors })).rejects.toThrow(
      /args\.pipelined: expected true or false, found/,
    );
  });

  it("weights are mapped, not copied: the load reports them and RSS stays small", async () => {
    const m = manifest["resnet-mini"]!;
    const plan = join(out, "resnet-weights.mlplan");
    const s = await compileOnnx(join(dir, m.onnx), plan);
    const r = await worker.run("load", { model: plan, maxBatch: 4 });
    expect(r.value.weightsBytes).toBe(s.weightsBytes);
    expect(r.value.arenaBytes).toBe(4 * s.arenaBytesPerSample);
    expect(existsSync(plan)).toBe(true);
  });
});
