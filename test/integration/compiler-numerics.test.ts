/**
 * Numerics of the compiler's rewrites: each fixture plan, turned back into ONNX, must give
 * ONNX Runtime's outputs for the original model (make_models.py's expected.bin, batch 2).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { type ModelEntry, ensureModels } from "../fixtures/onnx/models.ts";
import { planToOnnx } from "./compiler-plan-to-onnx.ts";
import { ortSession } from "../fixtures/ort-session.ts";

let dir = "";
let manifest: Record<string, ModelEntry> = {};
const out = mkdtempSync(join(tmpdir(), "memlane-compiler-numerics-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

beforeAll(() => {
  ({ dir, manifest } = ensureModels());
}, 300_000);

const f32 = (path: string) => {
  const b = readFileSync(path);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};

const MODELS = [
  "digits-cnn", "mlp", "mlp-external", "resnet-mini", "grouped-dilated", "pool-concat", "softmax",
  "transpose-reshape", "gelu-erf", "gelu-20", "leakyrelu", "matmul", "sub-div", "bn-standalone",
  "digits-cnn-dynamo", "resnet-mini-dynamo",
];

describe("compiled plans compute what the ONNX model computes (via ONNX Runtime)", () => {
  it.each(MODELS)("%s", async (name) => {
    const m = manifest[name]!;
    const planPath = join(out, `${name}.mlplan`);
    await compileOnnx(join(dir, m.onnx), planPath);
    const plan = readPlan(planPath);
    const sess = await ortSession(planToOnnx(plan));
    const x = f32(join(dir, m.input!));
    const shape = [m.batch!, ...m.inputShape.slice(1)];
    const res = await sess.run({ [sess.inputNames[0]!]: new ort.Tensor("float32", x, shape) });
    const got = res[sess.outputNames[0]!]!.data as Float32Array;
    const want = f32(join(dir, m.expected!));
    expect(got.length).toBe(want.length);
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / (1 + Math.abs(want[i]!)));
    expect(worst).toBeLessThan(1e-4);
  });
});
