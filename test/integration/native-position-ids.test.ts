/**
 * CumSum and GatherElements end to end (test/fixtures/onnx/make_position_models.py): a tiny
 * transformers RobertaModel from torch's legacy exporter (its position ids are cumsum(ids !=
 * pad), its token types a GatherElements from a buffer expanded to the batch), padded ids of
 * five lengths, and a hand-made graph with CumSum's exclusive/reverse flags and negative
 * GatherElements indices; compiled, run by memlane-rt through infer.native, and compared with
 * ONNX Runtime on the original model within 1e-4 of each output's scale.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { memlaneRtBinary } from "../../src/workers/specs.ts";
import { type FixtureModels, fixtureModels } from "../fixtures/native-fixture-models.ts";
import { REPO_ROOT } from "../fixtures/onnx/models.ts";

let BUILT = true;
try {
  memlaneRtBinary();
} catch (e) {
  BUILT = false;
  console.warn(`native-position-ids: skipped: ${(e as Error).message}`);
}

interface Entry {
  onnx: string;
  inputs: Record<string, { dtype: "float32" | "int64"; shape: number[]; rows: number }>;
  outputs: Record<string, { shape: number[] }>;
}

const SCRIPT = join(REPO_ROOT, "test/fixtures/onnx/make_position_models.py");

/** `input:<name>` wire tensors, batch first, in each input's dtype. */
function inputTensors(model: string) {
  return Object.fromEntries(Object.entries(fx.manifest[model]!.inputs).map(([n, s]) => {
    const raw = fx.bytes(`${model}.${n}.bin`);
    const data = s.dtype === "int64" ? new BigInt64Array(raw) : new Float32Array(raw);
    return [`input:${n}`, { dtype: s.dtype, shape: [s.rows, ...s.shape.slice(1)], data }];
  }));
}

const ioArg = (model: string) => ({
  inputs: Object.entries(fx.manifest[model]!.inputs).map(([name, s]) => ({ name, dtype: s.dtype, shape: s.shape, batchAxis: 0 })),
  outputs: Object.keys(fx.manifest[model]!.outputs).map((name) => ({ name })),
});

/** The legacy export leaves the sequence symbolic: fixed here at the fixture's 8. */
const SHAPES: Record<string, Record<string, number[]> | undefined> = {
  "roberta-tiny": { input_ids: [-1, 8], attention_mask: [-1, 8] },
  "cumsum-gather-elements": undefined,
};

let fx: FixtureModels<Entry>;

describe.skipIf(!BUILT)("CumSum and GatherElements on memlane-rt match ONNX Runtime", () => {
  fx = fixtureModels<Entry>(SCRIPT, "memlane-position-ids-");
  it.each(Object.keys(SHAPES))("%s", async (model) => {
    const plan = join(fx.dir, `${model}.mlplan`);
    await compileOnnx(join(fx.dir, fx.manifest[model]!.onnx), plan, SHAPES[model] && { inputShapes: SHAPES[model] });
    const ops = readPlan(plan).header.ops.map((o) => o.op);
    expect(ops).toContain("CumSum");
    expect(ops).toContain("GatherElements");
    // Batch 8 > the 5 rows: tiled; the outputs cover the rows in chunks of 8.
    const r = await fx.rt.run("infer.native", { model: plan, batchSizes: [2, 8], iterations: 2, warmup: 0, threads: 2, io: ioArg(model) }, { tensors: inputTensors(model) });
    fx.expectOutputsMatch(model, fx.manifest[model]!.outputs, r.tensors);
  });
});
