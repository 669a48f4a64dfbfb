/**
 * A decoder that generates with a key/value cache (test/fixtures/onnx/make_kv_cache_models.py:
 * new tokens' ids, a mask over past and new tokens, each layer's past keys and values in;
 * logits and present keys and values out). Its causal mask is a Trilu whose inputs only the
 * shapes decide: the compiler folds it, so memlane-rt runs the model and matches ONNX Runtime,
 * and the estimate's graph inference follows it for ORT (before the fold it left every
 * activation out: -42 % on a 4-layer decoder of this kind).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { activationsUnknown, modelTerms } from "../../src/estimate/model-terms.ts";
import { rtBuilt } from "../fixtures/rt-built.ts";
import { type FixtureModels, fixtureModels } from "../fixtures/native-fixture-models.ts";
import { REPO_ROOT } from "../fixtures/onnx/models.ts";

const BUILT = rtBuilt("native-kv-cache");

interface Entry {
  onnx: string;
  inputs: Record<string, { dtype: "float32" | "int64"; shape: number[]; rows: number }>;
  outputs: Record<string, { shape: number[] }>;
}

const MODEL = "kv-decoder";
let fx: FixtureModels<Entry>;

/** The fed shapes (-1 at the batch): the legacy export leaves every length symbolic. */
const shapesOf = (e: Entry) => Object.fromEntries(Object.entries(e.inputs).map(([n, s]) => [n, s.shape]));

describe.skipIf(!BUILT)("a decoder with a key/value cache", () => {
  fx = fixtureModels<Entry>(join(REPO_ROOT, "test/fixtures/onnx/make_kv_cache_models.py"), "memlane-kv-cache-");

  it("memlane-rt folds its causal mask (Trilu) and matches ONNX Runtime on logits and every present key and value", async () => {
    const entry = fx.manifest[MODEL]!;
    const plan = join(fx.dir, `${MODEL}.mlplan`);
    await compileOnnx(join(fx.dir, entry.onnx), plan, { inputShapes: shapesOf(entry) });
    const ops = readPlan(plan).header.ops.map((o) => o.op);
    expect(ops).not.toContain("Trilu");
    const tensors = Object.fromEntries(Object.entries(entry.inputs).map(([n, s]) => {
      const raw = fx.bytes(`${MODEL}.${n}.bin`);
      return [`input:${n}`, { dtype: s.dtype, shape: [s.rows, ...s.shape.slice(1)], data: s.dtype === "int64" ? new BigInt64Array(raw) : new Float32Array(raw) }];
    }));
    const io = {
      inputs: Object.entries(entry.inputs).map(([name, s]) => ({ name, dtype: s.dtype, shape: s.shape, batchAxis: 0 })),
      outputs: Object.keys(entry.outputs).map((name) => ({ name })),
    };
    const r = await fx.rt.run("infer.native", { model: plan, batchSizes: [2, 8], iterations: 2, warmup: 0, threads: 2, io }, { tensors });
    expect(Object.keys(entry.outputs)).toHaveLength(5);
    fx.expectOutputsMatch(MODEL, entry.outputs, r.tensors);
  }, 120_000);

  it("the estimate has activations for ORT and memlane-rt at the lengths fed", async () => {
    const entry = fx.manifest[MODEL]!;
    const t = await modelTerms(join(fx.dir, entry.onnx), { shapes: Object.fromEntries(Object.entries(shapesOf(entry)).map(([n, s]) => [n, s.map((d) => (d === -1 ? "N" : d))])) });
    for (const runtime of ["python-ort", "node-ort", "native"]) expect(activationsUnknown(t, runtime), runtime).toBeNull();
    expect(t.ortTracePerSample!.length).toBeGreaterThan(0);
  }, 120_000);
});
