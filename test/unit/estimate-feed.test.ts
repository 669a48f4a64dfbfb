// The estimate plans a model at what its benchmark will feed, with the batch where the
// benchmark puts it (src/pipeline/inputs/shapes.ts), not where the compiler would guess it (the
// first symbolic dim): a batch fixed at 1 before a symbolic seq, a seq-first layout (the zoo's
// transformer_encoder_*_sf), a fully static side input, and an `--inputs` file's arrays.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { features, fedInputShapes, modelTerms } from "../../src/estimate/model-terms.ts";
import { exportFeedOf } from "../../src/estimate/stage-facts.ts";
import type { StageDef } from "../../src/pipeline/stages.ts";
import { DYNAMIC_SEQ } from "../fixtures/ort-dynamic-seq.ts";
import { init, node, writeModel } from "./compiler-onnx-builder.ts";

const MIB = 2 ** 20;
/** ORT's pattern of DYNAMIC_SEQ a position: h (128 wide, Relu in place) and d (32 wide). */
const PER_POSITION = (128 + 32) * 4;

/** A .safetensors file of float32 arrays (zeros) of these shapes, as safetensors' save_file writes it. */
function writeSafetensors(file: string, arrays: Record<string, number[]>): string {
  let offset = 0;
  const header: Record<string, unknown> = {};
  for (const [name, shape] of Object.entries(arrays)) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: "F32", shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, json, Buffer.alloc(offset)]));
  return file;
}

describe("the shapes an estimate plans at", () => {
  it("put a batch fixed at 1 where the benchmark does, not at the symbolic seq", async () => {
    const file = writeModel({ ...DYNAMIC_SEQ, inputs: [["x", [1, "seq", 32]]] }, "batch1-seq");
    expect(fedInputShapes(file)).toEqual({ x: [-1, 128, 32] });
    const t = await modelTerms(file);
    expect(t.compileError).toBeNull();
    expect(t.ortPatternPerSampleMiB! * MIB).toBe(128 * PER_POSITION);
    expect(t.ioPerSampleMiB! * MIB).toBe(2 * 128 * 32 * 4);
  });

  it("count a seq-first model's eval set positive, the batch off dim 0", async () => {
    const file = writeModel({ ...DYNAMIC_SEQ, inputs: [["x", ["seq", "batch", 32]]] }, "seq-first");
    expect(fedInputShapes(file)).toEqual({ x: [128, -1, 32] });
    const t = await modelTerms(file);
    expect(t.compileError).toBeNull();
    expect(t.ioPerSampleMiB! * MIB).toBe(2 * 128 * 32 * 4);
    expect(t.outputPerSampleMiB! * MIB).toBe(128 * 32 * 4);
    const f = features("python-ort", t, { maxBatch: 8, evalSamples: 256 });
    expect(f.evalMiB).toBe(4);
    expect(f.evalOutputMiB).toBe(4);
  });

  it("leave a fully static side input to the graph's own shape", async () => {
    const file = writeModel({
      inputs: [["x", ["batch", "seq", 32]], ["s", [1, 32]]],
      outputs: ["y"],
      inits: [init("w1", [32, 128]), init("w2", [128, 32])],
      // A pooled vector [N, 32] plus the side input: the compiler, whose plans give every input a
      // batch (docs/plan-format.md, "Shapes"), plans s as [N, 32] and compiles it.
      nodes: [
        node("MatMul", ["x", "w1"], ["h"]), node("Relu", ["h"], ["r"]), node("MatMul", ["r", "w2"], ["d"]),
        node("ReduceMean", ["d"], ["p"], { axes: [1], keepdims: 0 }), node("Add", ["p", "s"], ["y"]),
      ],
    }, "side-input");
    expect(fedInputShapes(file)).toEqual({ x: [-1, 128, 32] });
    const t = await modelTerms(file);
    expect(t.compileError).toBeNull();
    expect(t.ortPatternPerSampleMiB).not.toBeNull();
    expect(t.ortPatternPerSampleMiB! * MIB).toBeGreaterThanOrEqual(128 * PER_POSITION);
    expect(features("python-ort", t, { maxBatch: 8, evalSamples: 16 }).activationMiB).toBeGreaterThan(0);
  });

  it("say why a feed the benchmark could not give either leaves the plan out", async () => {
    const file = writeModel(DYNAMIC_SEQ, "bad-feed");
    const t = await modelTerms(file, { shapes: { nope: ["N", 16, 32] } });
    expect(t.compileError).toMatch(/--shape: the model has no input "nope"/);
    expect(t.arenaPerSampleMiB).toBeNull();
    expect(t.ortPatternPerSampleMiB).toBeNull();
    expect(t.weightMiB * MIB).toBe((32 * 128 + 128 * 32) * 4);
  });

  it("follow an --inputs file's arrays, also as an export stage's inputs", async () => {
    const file = writeModel(DYNAMIC_SEQ, "from-file");
    const arrays = writeSafetensors(join(dirname(file), "x384.safetensors"), { x: [3, 384, 32] });
    expect(fedInputShapes(file, { inputsFile: arrays })).toEqual({ x: [-1, 384, 32] });
    const stage = { kind: "export", name: "e", opts: { onnx: file, inputs: arrays } } as unknown as StageDef;
    expect(exportFeedOf(stage)).toEqual({ inputsFile: arrays });
    const t = await modelTerms(file, exportFeedOf(stage));
    expect(t.ortPatternPerSampleMiB! * MIB).toBe(384 * PER_POSITION);
    const wrong = writeSafetensors(join(dirname(file), "y.safetensors"), { y: [3, 384, 32] });
    expect((await modelTerms(file, { inputsFile: wrong })).compileError).toMatch(/--inputs: .*has no array "x"/);
  });
});
