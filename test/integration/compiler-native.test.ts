/**
 * End to end: every fixture plan loaded by memlane-rt computes ONNX Runtime's outputs for
 * the original model (expected.bin, batch 2). Skips, visibly, without a memlane-rt build.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx } from "../../src/compiler/index.ts";
import { type WorkerHandle, Supervisor } from "../../src/workers/index.ts";
import { memlaneRtBinary, workerSpecs } from "../../src/workers/specs.ts";
import { type ModelEntry, ensureModels } from "../fixtures/onnx/models.ts";

let missing: string | undefined;
try {
  memlaneRtBinary();
} catch (e) {
  missing = (e as Error).message;
  console.warn(`compiler-native: skipped: ${missing}`);
}

const MODELS = [
  "digits-cnn", "mlp", "mlp-external", "resnet-mini", "grouped-dilated", "pool-concat", "softmax",
  "transpose-reshape", "gelu-erf", "gelu-20", "leakyrelu", "matmul", "sub-div", "bn-standalone",
  "digits-cnn-dynamo", "resnet-mini-dynamo",
];

const f32 = (path: string) => {
  const b = readFileSync(path);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};

describe.skipIf(missing !== undefined)("compiled plans on memlane-rt match ONNX Runtime", () => {
  let dir = "";
  let manifest: Record<string, ModelEntry> = {};
  let sup: Supervisor;
  let rt: WorkerHandle;
  const out = mkdtempSync(join(tmpdir(), "memlane-compiler-native-"));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  beforeAll(async () => {
    ({ dir, manifest } = ensureModels());
    sup = await Supervisor.start();
    rt = await sup.spawn(workerSpecs.memlaneRt());
  }, 300_000);
  afterAll(async () => {
    await sup?.close();
  });

  it.each(MODELS)("%s", async (name) => {
    const m = manifest[name]!;
    const plan = join(out, `${name}.mlplan`);
    const s = await compileOnnx(join(dir, m.onnx), plan);
    const loaded = await rt.run("load", { model: plan, maxBatch: 4, threads: 1 });
    expect(loaded.value.arenaBytes).toBe(4 * s.arenaBytesPerSample);
    const input = { dtype: "float32" as const, shape: [m.batch!, ...m.inputShape.slice(1)], data: f32(join(dir, m.input!)) };
    const r = await rt.run("run", {}, { tensors: { input } });
    const got = r.tensors.output!.data as Float32Array;
    const want = f32(join(dir, m.expected!));
    expect(r.tensors.output!.shape).toEqual([m.batch!, ...m.outputShape!.slice(1)]);
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / (1 + Math.abs(want[i]!)));
    expect(worst).toBeLessThan(1e-4);
  });
});
