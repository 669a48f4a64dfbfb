// memlane-rt's CPU backend chunks a batch only where a chunk is a smaller batch
// (native/runtime/src/cpu/cpu_backend.cc, mirrored in src/compiler/native-chunk.ts). A plan it
// runs whole touches the largest batch's arena at steady-inference, which the estimate took as
// one chunk: distilbert and the seq-first LSTM were under by 1.5 MiB of ~20.
import { describe, expect, it } from "vitest";
import type { PlanHeader } from "../../src/compiler/plan-format.ts";
import { features, modelTerms } from "../../src/estimate/model-terms.ts";
import { nativeChunkable, nativeChunkSamples, nativeLanes, NATIVE_CHUNK_ARENA_BYTES } from "../../src/compiler/native-chunk.ts";
import { DYNAMIC_SEQ } from "../fixtures/ort-dynamic-seq.ts";
import { writeModel } from "./compiler-onnx-builder.ts";

const MIB = 2 ** 20;
type H = Pick<PlanHeader, "tensors" | "ops">;
const t = (shape: number[], kind: "input" | "output" | "activation" | "weight" = "activation") => ({ name: "t", dtype: "float32", shape, kind, offset: 0, bytes: 4 }) as never;
const op = (name: string, inputs: number[], attrs: Record<string, number> = {}) => ({ op: name, name, inputs, outputs: [], attrs });

describe("nativeChunkable (cpu_backend.cc's rule)", () => {
  const base: H["tensors"] = [t([-1, 16], "input"), t([4], "weight"), t([-1, 16], "output"), t([3, 2], "weight")];
  it("chunks a batch-first plan", () => {
    expect(nativeChunkable({ tensors: base, ops: [op("MatMul", [0, 1])] })).toBe(true);
    expect(nativeChunkable({ tensors: base, ops: [op("Gather", [0, 1], { axis: 1 })] })).toBe(true);
    // RoBERTa's position ids: a CumSum and a GatherElements along the sequence stay per sample.
    expect(nativeChunkable({ tensors: base, ops: [op("CumSum", [0], { axis: 1 }), op("GatherElements", [0, 2], { axis: 1 })] })).toBe(true);
    expect(nativeChunkable({ tensors: base, ops: [op("GatherElements", [1, 2], { axis: 0 })] })).toBe(true); // a weight's rows
  });
  it("runs whole a plan with a tensor off batch-first, a Range, a Gather along the batch or a GatherND reaching it", () => {
    expect(nativeChunkable({ tensors: [...base, t([128, -1, 32])], ops: [] })).toBe(false);
    expect(nativeChunkable({ tensors: [...base, t([-2, 16])], ops: [] })).toBe(false); // k × batch at axis 0 is not batch-first either
    expect(nativeChunkable({ tensors: base, ops: [op("Range", [1, 1])] })).toBe(false);
    expect(nativeChunkable({ tensors: base, ops: [op("Gather", [0, 1], { axis: 0 })] })).toBe(false);
    expect(nativeChunkable({ tensors: base, ops: [op("GatherND", [0, 3])] })).toBe(false); // tuples of 2 reach axis 0
  });
  it("runs whole a plan with a CumSum or a GatherElements along the batch axis (sums over samples, sample numbers)", () => {
    expect(nativeChunkable({ tensors: base, ops: [op("CumSum", [0], { axis: 0 })] })).toBe(false);
    expect(nativeChunkable({ tensors: base, ops: [op("GatherElements", [0, 2], { axis: 0 })] })).toBe(false);
  });
  it("chunk samples: what fits 256 KiB, 1 at least, the batch at most; the batch when unchunkable", () => {
    expect(nativeChunkSamples(true, 64 * 1024, 8)).toBe(4);
    expect(nativeChunkSamples(true, NATIVE_CHUNK_ARENA_BYTES * 3, 8)).toBe(1);
    expect(nativeChunkSamples(true, 1024, 8)).toBe(8);
    expect(nativeChunkSamples(false, 64 * 1024, 8)).toBe(8);
  });
});

describe("memlane-rt's features of a plan it runs whole", () => {
  const run = { maxBatch: 8, evalSamples: 16 };
  it("a sequence-first model: one sample of arena at first, the other seven only at steady-inference", async () => {
    const seqFirst = writeModel({ ...DYNAMIC_SEQ, inputs: [["x", ["seq", "batch", 32]]] }, "seq-first");
    const terms = await modelTerms(seqFirst, { seq: 16 });
    expect(terms.compileError).toBeNull();
    expect(terms.nativeChunkable).toBe(false);
    const f = features("native", terms, run);
    expect(f.activationMiB).toBeCloseTo(terms.arenaPerSampleMiB!, 9);
    expect(f.largestBatchMiB).toBeCloseTo(7 * terms.arenaPerSampleMiB!, 9);
    expect(features("python-ort", terms, run).largestBatchMiB).toBe(0);
  });
  it("a batch-first one: chunked as before, nothing beyond", async () => {
    const terms = await modelTerms(writeModel(DYNAMIC_SEQ, "batch-first"), { seq: 16 });
    expect(terms.nativeChunkable).toBe(true);
    const f = features("native", terms, run);
    expect(f.largestBatchMiB).toBe(0);
    expect(f.activationMiB * MIB).toBeCloseTo(nativeChunkSamples(true, terms.arenaPerSampleMiB! * MIB, 8) * terms.arenaPerSampleMiB! * MIB, 3);
  });
});

describe("memlane-rt's lanes (a split batch's chunks side by side, one a thread)", () => {
  it("touch a chunk of arena in every lane the batch reaches (cpu_backend.cc run_lanes)", () => {
    // efficientnet_b0: one sample a chunk; batch 8 on 2 threads: two lanes, a sample each.
    expect(nativeLanes(true, 2, 1, 8)).toEqual({ lanes: 2, chunk: 1, used: 2, touchedSamples: 2 });
    // A chunk of 4 samples, batch 8: each lane an even share (4), both reached.
    expect(nativeLanes(true, 2, 8, 8)).toEqual({ lanes: 2, chunk: 4, used: 2, touchedSamples: 8 });
    // Batch 3 on 2 lanes of 2: the second lane's chunk is 1 sample.
    expect(nativeLanes(true, 2, 4, 3)).toEqual({ lanes: 2, chunk: 2, used: 2, touchedSamples: 3 });
    // One thread, an unchunkable plan, or a batch of one: a single lane.
    expect(nativeLanes(true, 1, 1, 8).used).toBe(1);
    expect(nativeLanes(false, 2, 8, 8).lanes).toBe(1);
    expect(nativeLanes(true, 2, 1, 1).lanes).toBe(1);
  });
  it("put the second lane's arena into the largest batch's figure", async () => {
    // seq 512: over 32 KiB of arena a sample, so a chunk of the 256 KiB budget is under 8 samples.
    const terms = await modelTerms(writeModel(DYNAMIC_SEQ, "batch-first-lanes"), { seq: 512 });
    const chunk = nativeChunkSamples(true, terms.arenaPerSampleMiB! * MIB, 8);
    const { touchedSamples } = nativeLanes(true, 2, chunk, 8);
    expect(touchedSamples).toBeGreaterThan(chunk);
    const one = features("native", terms, { maxBatch: 8, evalSamples: 16, threads: 1 });
    const two = features("native", terms, { maxBatch: 8, evalSamples: 16, threads: 2 });
    expect(two.activationMiB).toBeCloseTo(one.activationMiB, 9);
    // (No load probe here: no workspace curve, so the lanes' arena is the whole difference.)
    expect(two.largestBatchMiB - one.largestBatchMiB).toBeCloseTo((touchedSamples - chunk) * terms.arenaPerSampleMiB!, 9);
  });
});
