/**
 * Plan v2 end to end: torch models with two int64 inputs (ids + mask: embedding lookup on
 * run-time ids, masked mean, Linear) and a seq-first one (the batch at axis 1), from both
 * exporters, compiled (with inputShapes) and run by memlane-rt through the multi-input contract (`input:<name>` in,
 * `output:<name>` out, batch first on the wire), against ONNX Runtime within 1e-4 relative.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { compileOnnx } from "../../src/compiler/index.ts";
import { memlaneRtBinary } from "../../src/workers/specs.ts";
import { type FixtureModels, fixtureModels } from "../fixtures/native-fixture-models.ts";
import { INT_MODEL_SHAPES } from "../fixtures/onnx/int-model-shapes.ts";
import { relDiff } from "../fixtures/rel-diff.ts";

let BUILT = true;
try {
  memlaneRtBinary();
} catch (e) {
  BUILT = false;
  console.warn(`native-int-inputs: skipped: ${(e as Error).message}`);
}

interface Entry {
  onnx: string;
  inputs: Record<string, { dtype: string; axis: number; shape: number[] }>;
  outputs: Record<string, { axis: number; shape: number[] }>;
}

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "../fixtures/onnx/make_int_models.py");
/** Wire tensors for every graph input: `input:<name>`, batch first, in the model's dtype. */
function inputTensors(model: string) {
  const m = fx.manifest[model]!;
  return Object.fromEntries(Object.entries(m.inputs).map(([n, spec]) => {
    const data = new BigInt64Array(fx.bytes(`${model}.${n}.bin`));
    const rest = spec.shape.filter((_, i) => i !== spec.axis);
    return [`input:${n}`, { dtype: "int64" as const, shape: [data.length / rest.reduce((a, d) => a * d, 1), ...rest], data }];
  }));
}

const ioArg = (model: string) => ({
  inputs: Object.entries(fx.manifest[model]!.inputs).map(([name, s]) => ({ name, dtype: s.dtype, shape: s.shape, batchAxis: s.axis })),
  outputs: Object.keys(fx.manifest[model]!.outputs).map((name) => ({ name })),
});

/** Both exporters (legacy opset 17, dynamo opset 18); inputShapes for the legacy ones. */
const SHAPES = INT_MODEL_SHAPES;

let fx: FixtureModels<Entry>;

describe.skipIf(!BUILT)("plan v2: int64 inputs, several outputs, a batch at axis 1", () => {
  fx = fixtureModels<Entry>(SCRIPT, "memlane-int-inputs-");

  it.each(Object.keys(SHAPES))("%s: infer.native with input:<name> tensors matches ONNX Runtime", async (model) => {
    const plan = join(fx.dir, `${model}.mlplan`);
    const s = await compileOnnx(join(fx.dir, fx.manifest[model]!.onnx), plan, SHAPES[model] && { inputShapes: SHAPES[model] });
    expect(s.inputs.map((i) => [i.name, i.dtype, i.batchAxis])).toEqual(Object.entries(fx.manifest[model]!.inputs).map(([n, i]) => [n, "int64", i.axis]));
    // Batch 8 > the 5 eval rows: tiled; the outputs cover the eval set in chunks of 8.
    const r = await fx.rt.run("infer.native", { model: plan, batchSizes: [2, 8], iterations: 2, warmup: 0, threads: 2, io: ioArg(model) }, { tensors: inputTensors(model) });
    fx.expectOutputsMatch(model, fx.manifest[model]!.outputs, r.tensors);
  });

  it("load + run: several outputs by name; a wrong sequence length or a missing input is refused naming it", async () => {
    const plan = join(fx.dir, "masked-mean.mlplan");
    await compileOnnx(join(fx.dir, fx.manifest["masked-mean"]!.onnx), plan, { inputShapes: SHAPES["masked-mean"] });
    const loaded = await fx.rt.run("load", { model: plan, maxBatch: 8, device: "cpu" });
    expect(loaded.value.inputs).toEqual([
      { name: "ids", shape: [-1, 8], dtype: "int64", batchAxis: 0 },
      { name: "mask", shape: [-1, 8], dtype: "int64", batchAxis: 0 },
    ]);
    const t = inputTensors("masked-mean");
    const r = await fx.rt.run("run", {}, { tensors: t });
    expect(Object.keys(r.tensors).sort()).toEqual(["output:logits", "output:pooled"]);
    const want = new Float32Array(fx.bytes("masked-mean.logits.bin"));
    expect(relDiff(r.tensors["output:logits"]!.data as Float32Array, want)).toBeLessThanOrEqual(1e-4);

    const short = { ...t, "input:mask": { dtype: "int64" as const, shape: [5, 7], data: new BigInt64Array(35).fill(1n) } };
    await expect(fx.rt.run("run", {}, { tensors: short })).rejects.toThrow(/input 'mask': expected int64 \[5,8\].*got int64 \[5,7\]/);
    const bad = { "input:ids": { ...t["input:ids"]!, data: (t["input:ids"]!.data as BigInt64Array).map(() => 50n) }, "input:mask": t["input:mask"]! };
    await expect(fx.rt.run("run", {}, { tensors: bad })).rejects.toThrow(/index 50 is out of range \[-50, 50\)/);
    await expect(fx.rt.run("infer.native", { model: plan, batchSizes: [1], iterations: 1 }, { tensors: { "input:ids": t["input:ids"]! } })).rejects.toThrow(
      /no `input:mask` tensor/,
    );
  });

  it("the compiler refuses inputShapes that contradict the model, naming the input and dimension", async () => {
    const onnx = join(fx.dir, "masked-mean.onnx");
    await expect(compileOnnx(onnx, join(fx.dir, "x.mlplan"), { inputShapes: { ids: [-1, 9], mask: [-1, 8] } })).rejects.toThrow(
      /inputShapes\["ids"\]: dimension 1 is fixed to 8 in the model, received 9/,
    );
  });
});
