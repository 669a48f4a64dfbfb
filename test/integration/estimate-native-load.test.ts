// The native load probe (src/estimate/native-load.ts) in a real memlane-rt worker on a real
// plan: what the CPU backend's model-load leaves resident (its repacked copies of the conv
// weights) and the plan weight bytes it gives back, and modelTerms carrying both to memlane-rt's
// features only.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx } from "../../src/compiler/compile.ts";
import { features, modelTerms } from "../../src/estimate/model-terms.ts";
import { checkedNativeLoad, probeNativeLoad, workspaceAt } from "../../src/estimate/native-load.ts";
import { nativeChunkSamples, nativeLanes } from "../../src/compiler/native-chunk.ts";
import { HAS_AVX512F } from "../fixtures/cpu-flags.ts";
import { ROOT } from "./pipeline-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-native-load-"));
const onnx = join(dir, "convs.onnx");
const plan = join(dir, "convs.mlplan");
// The same convs, then a classifier (GlobalAveragePool, Gemm 256 -> 1024: 1 MiB of weights):
// the CPU backend runs the Gemm over the whole of a split batch (cpu/batch_tail.h).
const classifier = join(dir, "classifier.onnx");
const classifierPlan = join(dir, "classifier.mlplan");
// A 3x3 conv (64 -> 64, 144 KiB of weights) and a 1x1 conv (64 -> 256, 64 KiB): the CPU backend
// repacks both at load (Winograd's U, the pointwise panels) and gives their plan pages back.
const WEIGHT_MIB = (64 * 64 * 9 + 256 * 64) * 4 / 2 ** 20;
// An LSTM as torch exports nn.LSTM(batch_first=True): its input projections for every step are
// the kernel's workspace, LSTM_S x 4 x LSTM_H floats a sample.
const lstm = join(dir, "lstm.onnx");
const lstmPlan = join(dir, "lstm.mlplan");
const LSTM_S = 48;
const LSTM_H = 32;
// A transformer's MLP: MatMul -> Add(bias) -> Gelu -> MatMul, DENSE_S tokens of 32 -> 128 -> 32.
// The CPU backend runs the first three as one kernel, which writes only the Gelu's output.
const dense = join(dir, "dense.onnx");
const densePlan = join(dir, "dense.mlplan");
const DENSE_S = 256;

beforeAll(async () => {
  execFileSync(join(ROOT, ".venv/bin/python"), ["-c", `
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
W1 = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
W2 = (rng.standard_normal((256, 64, 1, 1)) * 0.05).astype(np.float32)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64, 28, 28])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 256, 28, 28])
nodes = [helper.make_node("Conv", ["x", "W1"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Conv", ["r", "W2"], ["y"])]
g = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(W2, "W2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
onnx.save(m, ${JSON.stringify(onnx)})
Wf = (rng.standard_normal((1024, 256)) * 0.05).astype(np.float32)
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 1024])
nodes += [helper.make_node("GlobalAveragePool", ["y"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
          helper.make_node("Gemm", ["f", "Wf"], ["z"], transB=1)]
g = helper.make_graph(nodes, "g", [x], [z], [numpy_helper.from_array(W, n) for W, n in ((W1, "W1"), (W2, "W2"), (Wf, "Wf"))])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
onnx.save(m, ${JSON.stringify(classifier)})
S, H, I = ${LSTM_S}, ${LSTM_H}, 8
W = (rng.standard_normal((1, 4 * H, I)) * 0.1).astype(np.float32)
R = (rng.standard_normal((1, 4 * H, H)) * 0.1).astype(np.float32)
B = (rng.standard_normal((1, 8 * H)) * 0.1).astype(np.float32)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", S, I])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", S, H])
nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
         helper.make_node("LSTM", ["xt", "W", "R", "B"], ["Y"], hidden_size=H),
         helper.make_node("Squeeze", ["Y", "one"], ["ys"]),
         helper.make_node("Transpose", ["ys"], ["y"], perm=[1, 0, 2])]
inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B"), numpy_helper.from_array(np.array([1], np.int64), "one")]
m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
onnx.save(m, ${JSON.stringify(lstm)})
W1 = (rng.standard_normal((32, 128)) * 0.1).astype(np.float32)
b1 = (rng.standard_normal(128) * 0.1).astype(np.float32)
W2 = (rng.standard_normal((128, 32)) * 0.1).astype(np.float32)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", ${DENSE_S}, 32])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", ${DENSE_S}, 32])
nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["s"]),
         helper.make_node("Gelu", ["s"], ["g"]), helper.make_node("MatMul", ["g", "W2"], ["y"])]
inits = [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(W2, "W2")]
m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 20)]); m.ir_version = 9
onnx.save(m, ${JSON.stringify(dense)})
`]);
  await compileOnnx(onnx, plan, { verify: false });
  await compileOnnx(classifier, classifierPlan, { verify: false });
  await compileOnnx(lstm, lstmPlan, { verify: false });
  await compileOnnx(dense, densePlan, { verify: false });
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The convs here are repacked only by the AVX-512 kernels (conv.cc picks them by the CPU).
const repacks = it.skipIf(!HAS_AVX512F);

describe("native load probe", () => {
  repacks("measures the repacked copies the load leaves and the plan pages it gives back", async () => {
    const p = await probeNativeLoad(plan);
    // Winograd's U alone is larger than the 3x3 kernel it comes from.
    expect(p.loadMiB).toBeGreaterThan(WEIGHT_MIB);
    // Every whole page inside the two weights: all but at most a page at each end of each.
    expect(p.releasedMiB).toBeGreaterThan(WEIGHT_MIB - (4 * 4096) / 2 ** 20);
    expect(p.releasedMiB).toBeLessThanOrEqual(WEIGHT_MIB);
  }, 60_000);

  repacks("gives back nothing where the backend keeps the originals (MEMLANE_CPU_KEEP_WEIGHTS=1), and then holds them", async () => {
    const released = await probeNativeLoad(plan);
    process.env.MEMLANE_CPU_KEEP_WEIGHTS = "1";
    try {
      const kept = await probeNativeLoad(plan);
      expect(kept.releasedMiB).toBe(0);
      // The originals the kernels read while repacking stay resident.
      expect(kept.loadMiB).toBeGreaterThan(released.loadMiB + WEIGHT_MIB / 2);
    } finally {
      delete process.env.MEMLANE_CPU_KEEP_WEIGHTS;
    }
  }, 60_000);

  repacks("modelTerms runs it only when asked, and only memlane-rt's features carry its figures", async () => {
    const without = await modelTerms(onnx);
    expect(without.nativeLoadMiB).toBeNull();
    const t = await modelTerms(onnx, {}, { nativeLoad: true });
    expect(t.nativeLoadMiB).toBeGreaterThan(WEIGHT_MIB);
    const run = { maxBatch: 8, evalSamples: 16 };
    expect(features("native", t, run).loadMiB).toBe(t.nativeLoadMiB);
    expect(features("native", t, run).nativeReleasedMiB).toBe(t.nativeReleasedMiB);
    // The load's peak above its end: the originals held with their copies, a part of the weights.
    expect(t.nativeLoadPeakAboveEndMiB).toBeGreaterThanOrEqual(0);
    expect(t.nativeLoadPeakAboveEndMiB).toBeLessThan(t.nativeLoadMiB!);
    expect(features("native", t, run).loadTransientMiB).toBe(t.nativeLoadPeakAboveEndMiB);
    // Without ORT's own load probe, its load term is the weights and its transient none.
    expect(features("python-ort", t, run).loadTransientMiB).toBe(0);
    expect(features("python-ort", t, run).loadMiB).toBe(t.weightMiB);
    expect(features("native", without, run).loadMiB).toBe(0);
  }, 120_000);

  it("gives the batch tail's arena a sample, which a split batch's estimate adds for the whole batch", async () => {
    const convs = await probeNativeLoad(plan);
    expect(convs.batchTailPerSampleMiB).toBe(0);  // no op whose weights outweigh its activations
    const p = await probeNativeLoad(classifierPlan);
    // The Gemm's input and output: (256 + 1024) floats a sample, 64-byte aligned.
    expect(p.batchTailPerSampleMiB * 2 ** 20).toBe((256 + 1024) * 4);
    const t = await modelTerms(classifier, {}, { nativeLoad: true });
    expect(t.nativeBatchTailPerSampleMiB).toBe(p.batchTailPerSampleMiB);
    const whole = features("native", { ...t, nativeBatchTailPerSampleMiB: 0 }, { maxBatch: 8, evalSamples: 16 });
    const split = features("native", t, { maxBatch: 8, evalSamples: 16 });
    expect(split.largestBatchMiB).toBeCloseTo(7 * p.batchTailPerSampleMiB, 12);
    expect(split.activationMiB - whole.activationMiB).toBeCloseTo(p.batchTailPerSampleMiB, 12);
    // A batch of one is never split: no tail.
    expect(features("native", t, { maxBatch: 1, evalSamples: 16 }).largestBatchMiB).toBe(0);
    // The tail's own figures: the Gemm writes its output and the carried input is copied in, so
    // nothing is unwritten; its workspace curve has a point a batch (none without a tail).
    expect(p.batchTailUnwrittenPerSampleMiB).toBe(0);
    expect(p.batchTailWorkspaceByBatchMiB.length).toBe(p.workspaceByBatchMiB.length);
    expect(convs.batchTailUnwrittenPerSampleMiB).toBe(0);
    expect(convs.batchTailWorkspaceByBatchMiB).toEqual([]);
    expect(t.nativeBatchTailUnwrittenPerSampleMiB).toBe(0);
    expect(t.nativeBatchTailWorkspaceByBatchMiB).toEqual(p.batchTailWorkspaceByBatchMiB);
    // A tail whose fused kernels leave a quarter of its arena unwritten, and whose kernels' workspace
    // at the whole batch outgrows the chunks': the largest batch touches the written tail bytes and
    // the larger workspace (mobilenet_v2 at batch 64: +7 MiB, +3.7 % steady, when both were left out).
    const tail = p.batchTailPerSampleMiB;
    const ws = t.nativeWorkspaceByBatchMiB!;
    const tailWs = ws.map((_, i) => 2 ** i);  // 1 MiB a sample
    const run = { maxBatch: 8, evalSamples: 16 };
    const lanes = nativeLanes(true, 1, nativeChunkSamples(true, t.arenaPerSampleMiB! * 2 ** 20, 8), 8);
    const fused = features("native", { ...t, nativeBatchTailUnwrittenPerSampleMiB: tail / 4, nativeBatchTailWorkspaceByBatchMiB: tailWs }, run);
    const chunksWs = lanes.used * workspaceAt(ws, lanes.chunk);
    expect(fused.largestBatchMiB - split.largestBatchMiB).toBeCloseTo(-7 * (tail / 4) + Math.max(0, 8 - chunksWs), 12);
    expect(fused.activationMiB - split.activationMiB).toBeCloseTo(-tail / 4, 12);  // a batch of one writes one sample of it
  }, 120_000);

  it("gives the kernels' workspace by batch (an LSTM's projections), which the first request and the largest batch touch", async () => {
    const convs = await probeNativeLoad(classifierPlan);
    const p = await probeNativeLoad(lstmPlan);
    const projections = LSTM_S * 4 * LSTM_H * 4;
    const c = p.workspaceByBatchMiB.map((x) => x * 2 ** 20);
    // Batches 1, 2, 4 ... : the projections grow a sample at a time, plus h and c a sample (two of
    // h, one of c; the portable kernel's gate row).
    expect(c.length).toBeGreaterThanOrEqual(7);
    expect(c[1]! - c[0]!).toBeGreaterThanOrEqual(projections);
    expect(c[1]! - c[0]!).toBeLessThanOrEqual(projections + 8 * LSTM_H * 4);
    expect(c[4]! - c[0]!).toBeCloseTo(15 * (c[1]! - c[0]!), 0);  // unchunked: linear to 16
    expect(c[1]! - c[0]!).toBeGreaterThan(10 * (convs.workspaceByBatchMiB[1]! - convs.workspaceByBatchMiB[0]!) * 2 ** 20);
    const t = await modelTerms(lstm, {}, { nativeLoad: true });
    expect(t.nativeWorkspaceByBatchMiB).toEqual(p.workspaceByBatchMiB);
    // The first request touches one sample's workspace; the largest batch the rest of the
    // samples it runs at once.
    const f = (maxBatch: number, curve: number[]) => features("native", { ...t, nativeWorkspaceByBatchMiB: curve }, { maxBatch, evalSamples: 16 });
    const samples = t.nativeChunkable === false ? 16 : nativeChunkSamples(true, t.arenaPerSampleMiB! * 2 ** 20, 16);
    expect(samples).toBeGreaterThan(1);
    const none = p.workspaceByBatchMiB.map(() => 0);
    expect(f(16, p.workspaceByBatchMiB).largestBatchMiB - f(16, none).largestBatchMiB).toBeCloseTo(workspaceAt(p.workspaceByBatchMiB, samples) - p.workspaceByBatchMiB[0]!, 12);
    expect(f(16, p.workspaceByBatchMiB).nativeWorkspaceMiB).toBe(p.workspaceByBatchMiB[0]);
    expect(f(1, p.workspaceByBatchMiB).largestBatchMiB).toBe(0);
    expect(features("python-ort", t, { maxBatch: 16, evalSamples: 16 }).largestBatchMiB).toBe(0);
    expect(features("python-ort", t, { maxBatch: 16, evalSamples: 16 }).nativeWorkspaceMiB).toBe(0);
  }, 120_000);

  it("reads the workspace curve between and past its points", () => {
    // Linear to 4 samples, then capped (an im2col chunk's cap), as a conv's workspace grows.
    const curve = [1, 2, 4, 4, 4];
    expect(workspaceAt(curve, 1)).toBe(1);
    expect(workspaceAt(curve, 3)).toBe(3);
    expect(workspaceAt(curve, 6)).toBe(4);
    expect(workspaceAt(curve, 64)).toBe(4);  // flat at the end: flat beyond it
    expect(workspaceAt([1, 2, 4], 8)).toBe(8);  // still growing at the end: grows on
    expect(workspaceAt([], 8)).toBe(0);
  });

  it("gives the arena bytes its fused kernels never write, which the estimate leaves out at every batch", async () => {
    // h (the product) and s (the biased sum), DENSE_S x 128 floats a sample each, are inside the
    // MatMul -> Add -> Gelu kernel; the planner may lay g or y over part of them.
    const inside = 2 * DENSE_S * 128 * 4;
    const p = await probeNativeLoad(densePlan);
    expect(p.unwrittenPerSampleMiB * 2 ** 20).toBeGreaterThan(0);
    expect(p.unwrittenPerSampleMiB * 2 ** 20).toBeLessThanOrEqual(inside);
    const t = await modelTerms(dense, {}, { nativeLoad: true });
    expect(t.nativeUnwrittenPerSampleMiB).toBe(p.unwrittenPerSampleMiB);
    // The plan runs in chunks: each chunk's samples leave it out.
    const run = { maxBatch: 64, evalSamples: 64 };
    const written = features("native", t, run);
    const all = features("native", { ...t, nativeUnwrittenPerSampleMiB: 0 }, run);
    const samples = nativeChunkSamples(true, t.arenaPerSampleMiB! * 2 ** 20, 64);
    expect(all.activationMiB - written.activationMiB).toBeCloseTo(samples * p.unwrittenPerSampleMiB, 12);
    // Run apart, every tensor is written.
    process.env.MEMLANE_NO_FUSION = "1";
    try {
      expect((await probeNativeLoad(densePlan)).unwrittenPerSampleMiB).toBe(0);
    } finally {
      delete process.env.MEMLANE_NO_FUSION;
    }
    // Without the probe the estimate counts the whole arena.
    expect((await modelTerms(dense)).nativeUnwrittenPerSampleMiB).toBeNull();
  }, 120_000);

  it("refuses a worker's answer it cannot use, naming what was wrong", () => {
    const mark = (m: "start" | "end", rssKiB: number, hwmKiB = rssKiB) => ({ name: "model-load", mark: m, memory: { rssKiB, hwmKiB } }) as never;
    const ok = { weightsBytesReleased: 2 ** 20, batchTailBytesPerSample: 2 ** 19, workspaceBytesByBatch: [2 ** 18, 2 ** 19], arenaUnwrittenBytesPerSample: 2 ** 17, batchTailUnwrittenBytesPerSample: 2 ** 16, batchTailWorkspaceBytesByBatch: [2 ** 20, 2 ** 21] };
    expect(checkedNativeLoad([mark("start", 1000), mark("end", 3048)], ok)).toEqual({
      loadMiB: 2, loadPeakAboveEndMiB: 0, releasedMiB: 1, batchTailPerSampleMiB: 0.5, workspaceByBatchMiB: [0.25, 0.5], unwrittenPerSampleMiB: 0.125,
      batchTailUnwrittenPerSampleMiB: 0.0625, batchTailWorkspaceByBatchMiB: [1, 2],
    });
    // no tail: an empty tail curve
    expect(checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, batchTailBytesPerSample: 0, batchTailUnwrittenBytesPerSample: 0, batchTailWorkspaceBytesByBatch: [] }).batchTailWorkspaceByBatchMiB).toEqual([]);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, batchTailWorkspaceBytesByBatch: [8, -1] })).toThrow(/batchTailWorkspaceBytesByBatch is \[8,-1\]/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, batchTailUnwrittenBytesPerSample: Number.NaN })).toThrow(/batchTailUnwrittenBytesPerSample is null/);
    // the peak 3 MiB above the load's end (VmHWM at the end mark)
    expect(checkedNativeLoad([mark("start", 1000), mark("end", 3048, 6120)], ok).loadPeakAboveEndMiB).toBe(3);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048, Number.NaN)], ok)).toThrow(/RSS readings and end HWM/);
    expect(() => checkedNativeLoad([mark("end", 3048)], ok)).toThrow(/no model-load start and end/);
    expect(() => checkedNativeLoad([mark("start", Number.NaN), mark("end", 3048)], ok)).toThrow(/RSS readings/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, weightsBytesReleased: -1 })).toThrow(/weightsBytesReleased is -1/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], {})).toThrow(/weightsBytesReleased is undefined/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { weightsBytesReleased: 0 })).toThrow(/batchTailBytesPerSample is undefined/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, workspaceBytesByBatch: "big" })).toThrow(/workspaceBytesByBatch is "big"/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, workspaceBytesByBatch: [] })).toThrow(/workspaceBytesByBatch is \[\]/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, workspaceBytesByBatch: [4, 2] })).toThrow(/non-decreasing/);
    expect(() => checkedNativeLoad([mark("start", 1000), mark("end", 3048)], { ...ok, arenaUnwrittenBytesPerSample: undefined })).toThrow(/arenaUnwrittenBytesPerSample is undefined/);
  });
});
