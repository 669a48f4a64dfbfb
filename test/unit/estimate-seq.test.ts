// A model with a symbolic sequence besides its batch (a transformer exported with a dynamic
// seq): the estimate's model terms take the shapes the benchmark will feed (every such dim at
// --seq, 128 by default, or --shape), where they used to fall back to nothing (the compiler
// and the ORT replay refuse a symbolic non-batch dim).
import { describe, expect, it } from "vitest";
import { features, fedInputShapes, modelTerms } from "../../src/estimate/model-terms.ts";
import { evalChunks, replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { patternBytesAtBatch } from "../../src/estimate/ort-pattern.ts";
import { exportFeedOf } from "../../src/estimate/stage-facts.ts";
import type { StageDef } from "../../src/pipeline/stages.ts";
import { DYNAMIC_SEQ } from "../fixtures/ort-dynamic-seq.ts";
import { writeModel } from "./compiler-onnx-builder.ts";

const MIB = 2 ** 20;

describe("model terms of a model with a symbolic sequence", () => {
  const file = writeModel(DYNAMIC_SEQ, "dynamic-seq");

  it("are computed at the benchmark's default seq (128)", async () => {
    expect(fedInputShapes(file)).toEqual({ x: [-1, 128, 32] });
    const t = await modelTerms(file);
    expect(t.compileError).toBeNull();
    // h and r share a buffer (Relu in place), d is new: 128 × (128 + 32) floats a sample.
    expect(t.ortPatternPerSampleMiB! * MIB).toBe(128 * (128 + 32) * 4);
    expect(t.arenaPerSampleMiB).toBeGreaterThan(0);
    expect(t.ioPerSampleMiB! * MIB).toBe(2 * 128 * 32 * 4);
    // The arena replay is fed the trace at the same seq: its pattern is the one above.
    expect(patternBytesAtBatch(t.ortTracePerSample!, 8)).toBe(8 * 128 * (128 + 32) * 4);
    // (python-ort's eval pass, two chunks of 8, keeps its outputs in the arena until it ends.)
    const evalPass = { chunks: evalChunks(16, 8), holdOutputs: true };
    expect(features("python-ort", t, { maxBatch: 8, evalSamples: 16 }).activationMiB).toBeCloseTo(replayOrtArena(t.ortTracePerSample!, [1, 8], undefined, evalPass).residentBytes / MIB, 9);
  });

  it("follow --seq and --shape", async () => {
    const short = await modelTerms(file, { seq: 16 });
    expect(short.ortPatternPerSampleMiB! * MIB).toBe(16 * (128 + 32) * 4);
    const shaped = await modelTerms(file, { shapes: { x: ["N", 64, 32] } });
    expect(shaped.ortPatternPerSampleMiB! * MIB).toBe(64 * (128 + 32) * 4);
  });

  it("leave a model whose only symbolic dim is the batch as it is", async () => {
    const fixed = writeModel({ ...DYNAMIC_SEQ, inputs: [["x", ["batch", 10, 32]]] }, "fixed-seq");
    expect(fedInputShapes(fixed)).toBeUndefined();
    expect((await modelTerms(fixed)).ortPatternPerSampleMiB! * MIB).toBe(10 * (128 + 32) * 4);
  });
});

describe("what a pipeline's benchmark feeds", () => {
  it("is its export stage's seq and shapes; nothing for other stages", () => {
    const exp = { kind: "export", name: "e", opts: { onnx: "m.onnx", seq: 32, shapes: { x: ["N", 32, 32] } } } as unknown as StageDef;
    expect(exportFeedOf(exp)).toEqual({ seq: 32, shapes: { x: ["N", 32, 32] } });
    expect(exportFeedOf({ kind: "export", name: "z", opts: { zoo: "tiny-gpt" } } as unknown as StageDef)).toEqual({});
    expect(exportFeedOf({ kind: "train", name: "t", opts: { arch: "mlp" } } as unknown as StageDef)).toEqual({});
    expect(exportFeedOf(undefined)).toEqual({});
  });
});
