// The ORT activation term of the estimate (src/estimate/ort-pattern.ts) against ONNX Runtime
// itself: real zoo exports (a transformer, a residual CNN, a small CNN), the block ORT's
// arena is asked for on the second request of a shape read from its verbose log
// (test/fixtures/ort_pattern_size.py), and the simulated pattern at the same batch.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { activationsUnknown, features, fedInputShapes, modelTerms } from "../../src/estimate/model-terms.ts";
import { replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { ortPatternBytesPerSample, ortRunTracePerSample, patternBytesAtBatch } from "../../src/estimate/ort-pattern.ts";
import { pythonPath, REPO_ROOT } from "../fixtures/onnx/models.ts";
import { ortPatternBytes } from "../fixtures/ort-pattern-size.ts";
import { exportZooArchs } from "../fixtures/zoo-export.ts";
import { DYNAMIC_SEQ } from "../fixtures/ort-dynamic-seq.ts";
import { CONV_AFFINE, CONV_HARDSWISH, CONV_HARDSWISH_BODY, NOOP_ARITHMETIC, QUICK_GELU_CHAIN, SE_BLOCKS, SILU_CHAIN, GATHERED_QKV, TALKING_HEADS, TF_PADDING, WRITTEN_LAYER_NORM, GEMM_RELU } from "../fixtures/ort-fusions.ts";
import { TWO_BRANCHES } from "../fixtures/ort-two-branches.ts";
import { ORT_ONLY_OPS } from "../fixtures/ort-only-ops.ts";
import { CONV1D_NET } from "../fixtures/ort-plain-layouts.ts";
import { compileOnnx } from "../../src/compiler/compile.ts";
import { init, node, writeModel } from "../unit/compiler-onnx-builder.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-ort-pattern-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const ARCHS = ["tiny-gpt", "resnet-mini", "digits-cnn"] as const;

beforeAll(() => exportZooArchs(dir, ARCHS, "ort-pattern-export"), 600_000);

describe("ORT's memory pattern, simulated from the graph", () => {
  // tiny-gpt: 38.0 MiB at batch 64 where 19.5 are alive at once (the planner's exact-shape reuse);
  // resnet-mini: the Conv + residual Add fusion of ORT's extended level; digits-cnn: a plain chain.
  it.each([["tiny-gpt", 8], ["tiny-gpt", 64], ["resnet-mini", 64], ["digits-cnn", 256]] as const)("%s at batch %i: the block ORT asks for", async (arch, batch) => {
    const onnx = path.join(dir, `${arch}.onnx`);
    const simulated = ortPatternBytesPerSample(loadOnnx(onnx)) * batch;
    const measured = await ortPatternBytes(onnx, batch);
    expect(Math.abs(simulated - measured) / measured, `simulated ${simulated} B, ORT ${measured} B`).toBeLessThan(0.01);
  }, 120_000);

  // Two branches the file lists interleaved: ORT runs one, then the other (ort-order.ts).
  it("runs the nodes in ORT's order: one branch's wide middle at a time", async () => {
    const onnx = writeModel(TWO_BRANCHES, "two-branches", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 64).toBe(await ortPatternBytes(onnx, 64));
  }, 120_000);

  // ORT's level "all" fusions that change which tensors exist: SiLU and quick_gelu → QuickGelu, Conv + HardSwish;
  // and its NCHWc layout's blocked maps sharing buffers with plain tensors of the same dims (SE blocks).
  it.each([["silu-chain", SILU_CHAIN], ["quick-gelu-chain", QUICK_GELU_CHAIN], ["conv-hardswish", CONV_HARDSWISH], ["se-blocks", SE_BLOCKS]] as const)("%s: the fused nodes' block", async (name, spec) => {
    const onnx = writeModel(spec, name, dir);
    const simulated = ortPatternBytesPerSample(loadOnnx(onnx)) * 64;
    const measured = await ortPatternBytes(onnx, 64);
    expect(Math.abs(simulated - measured) / measured, `simulated ${simulated} B, ORT ${measured} B`).toBeLessThan(0.01);
  }, 120_000);

  // TF-style padding: the Pads ORT folds into their Convs are never tensors, those it keeps are
  // (without the rule: a transformers MobileNetV2's block 53 % over ORT's).
  it("tf-padding: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(TF_PADDING, "tf-padding", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // HardSwish written as HardSigmoid and Mul (torch below opset 14): whole in the conv ORT blocks,
  // the pair after the one it does not (the pair kept everywhere: 3211264 B; mobilenet_v3_small
  // at opset 13 20 % over ORT's block).
  it("conv-hardswish-body: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(CONV_HARDSWISH_BODY, "conv-hardswish-body", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // A frozen batch norm as a Mul and an Add after each conv: folded into the convs by ORT's
  // level-1 rewrites, but a Mul by a whole map (without the rule: 1572864 B against 1048576).
  it("conv-affine: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(CONV_AFFINE, "conv-affine", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // x + 0, x * 1, x / 1 and x - (-0) go, their readers take x; a block summed from `conv + 0`
  // stays one NCHWc chain (timm's MobileOne: 4.59 MiB a sample in the replay without the rule, 2.87 in ORT's block).
  it("noop-arithmetic: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(NOOP_ARITHMETIC, "noop-arithmetic", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // The Transpose before a Softmax moves through it and cancels the one after (CaiT's talking
  // heads): two score-sized tensors fewer.
  it("talking-heads: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(TALKING_HEADS, "talking-heads", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // The permute of a fused q, k, v projection moves after each Gather that indexes it, and the
  // projection dies before the scores (CaiT: the replay's pattern was 1.37x ORT's block).
  it("gathered-qkv: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(GATHERED_QKV, "gathered-qkv", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // A LayerNorm written out is one LayerNormalization to ORT: only its output is a tensor
  // (I-BERT: its requests of a stale pattern took the chain's tensors, its eval pass then grew
  // the arena 16 MiB the replay did not).
  it("written-layer-norm: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(WRITTEN_LAYER_NORM, "written-layer-norm", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // A Gemm and its Relu are one FusedGemm to ORT: where the rows' count is not known to its
  // planner the Relu would have been a tensor of its own (OPT: 1.86x ORT's block).
  it("gemm-relu: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(GEMM_RELU, "gemm-relu", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // A 1-D net: its MaxPool stays plain and its HardSwish runs as HardSigmoid and Mul (old rules: 819200 B).
  it("conv1d-net: the block ORT asks for at batch 8", async () => {
    const onnx = writeModel(CONV1D_NET, "conv1d-net", dir);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // A decoder upsampling by scales: ORT's planner reuses no buffer after the Resize (reused:
  // 14075392 B); an FPN neck's concat with a lateral map takes the batch dim's name back.
  it.each([["style", "upsample-decoder"], ["fpn", "fpn-neck"]] as const)("%s: the block ORT asks for at batch 8 after an upsampling by scales", async (kind, name) => {
    const onnx = path.join(dir, `${name}.onnx`);
    await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/upsample_decoder.py"), onnx, kind]);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 300_000);

  // LocalResponseNorm as torch writes it (test/fixtures/lrn_model.py): an If the shapes decide,
  // inlined, whose output ORT has no shape for, and a Pad ORT keeps. The replay could not follow
  // the If before; inlined with the If's output taken as shaped and the Pad folded, it was 65 %
  // over ORT's block.
  it("an AlexNet-style net with LocalResponseNorm: the block ORT asks for at batch 8", async () => {
    const onnx = path.join(dir, "lrn-net.onnx");
    await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/lrn_model.py"), onnx]);
    const simulated = patternBytesAtBatch(ortRunTracePerSample(loadOnnx(onnx)), 8);
    const measured = await ortPatternBytes(onnx, 8);
    expect(Math.abs(simulated - measured) / measured, `simulated ${simulated} B, ORT ${measured} B`).toBeLessThan(0.001);
  }, 120_000);

  // A Resize to its input's own size (UperNet's 6x6 pyramid level resized to 6x6) is a view to
  // the compiler and a copy to ORT: taken as a view, the replay's block here was half ORT's.
  it("an identity Resize: ORT's block holds its copy", async () => {
    const onnx = writeModel({
      inputs: [["x", ["N", 16, 8, 8]]], outputs: ["y"], inits: [init("sc", [4], [1, 1, 1, 1])],
      nodes: [node("Relu", ["x"], ["a"]), node("Resize", ["a", "", "sc"], ["b"], { mode: "nearest" }), node("Add", ["a", "b"], ["y"])],
    }, "identity-resize", dir);
    expect(patternBytesAtBatch(ortRunTracePerSample(loadOnnx(onnx)), 8)).toBe(await ortPatternBytes(onnx, 8));
  }, 60_000);

  // ConvNeXt: ORT's transpose optimizer runs the first stage channels-last (its blocks' closing
  // Transposes cancel against the stem's) and moves none in the last (ort-transposes.ts); ONNX's
  // own Gelu (opset 20) takes its bias as a BiasGelu. Without both: 4423680 against 3833856.
  it("a ConvNeXt: the Transposes ORT moves and cancels", async () => {
    const onnx = path.join(dir, "convnext-mini.onnx");
    await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/convnext_mini_model.py"), onnx]);
    expect(ortPatternBytesPerSample(loadOnnx(onnx)) * 8).toBe(await ortPatternBytes(onnx, 8));
  }, 120_000);

  // transformers' PoolFormer and SegFormer: their shape values, computed at run time, live from
  // where ORT computes them to the last Reshape that reads them, in ORT's order of its final
  // graph, and a scalar one never takes a freed buffer. Without those rules the replay was 8.3 %
  // under ORT's block (PoolFormer) and 9.6 % over it (SegFormer at batch 1). UperNet and DPT
  // (test/fixtures/hf_vision_model.py): ORT's CSE of norms torch aliases, the Transpose two convs
  // read, the conv after a concat of unshaped maps, bilinear upsampling on blocked maps; the
  // replay was 34 % (UperNet) and 11 % (DPT at batch 8) under ORT's block.
  it.each([["poolformer", 1], ["poolformer", 8], ["segformer", 1], ["upernet", 1], ["upernet", 8], ["dpt", 8]] as const)("%s at batch %i: the block ORT asks for", async (name, batch) => {
    const onnx = path.join(dir, `${name}.onnx`);
    if (!existsSync(onnx)) await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/hf_vision_model.py"), onnx, name]);
    const simulated = patternBytesAtBatch(ortRunTracePerSample(loadOnnx(onnx)), batch);
    const measured = await ortPatternBytes(onnx, batch);
    expect(Math.abs(simulated - measured) / measured, `simulated ${simulated} B, ORT ${measured} B`).toBeLessThan(0.01);
  }, 180_000);

  // A dynamic sequence: replayed at the seq the benchmark feeds.
  it.each([16, 128])("replays a model with a symbolic sequence at seq %i", async (seq) => {
    const onnx = writeModel(DYNAMIC_SEQ, "dynamic-seq", dir);
    const simulated = ortPatternBytesPerSample(loadOnnx(onnx), fedInputShapes(onnx, { seq })) * 8;
    expect(simulated).toBe(await ortPatternBytes(onnx, 8, seq));
  }, 120_000);

  it("is the activation term of python-ort and node-ort; memlane-rt keeps its compiler's arena", async () => {
    const t = await modelTerms(path.join(dir, "tiny-gpt.onnx"));
    const run = { maxBatch: 64, evalSamples: 16 };
    expect(t.ortPatternPerSampleMiB).toBeGreaterThan(2 * t.arenaPerSampleMiB!);
    // Its arena replayed over batch 1, 64, then the 16 eval samples, a shape of their own
    // (ort-arena.ts): more than the pattern at 64.
    const replayed = replayOrtArena(t.ortTracePerSample!, [1, 64, 16]).residentBytes / 2 ** 20;
    expect(replayed).toBeGreaterThan(64 * t.ortPatternPerSampleMiB!);
    expect(features("python-ort", t, run).activationMiB).toBeCloseTo(replayed, 9);
    expect(features("node-ort", t, run).activationMiB).toBeCloseTo(replayed, 9);
    expect(features("native", t, run).activationMiB).toBeLessThan(features("python-ort", t, run).activationMiB);
  }, 120_000);

  // Ops memlane-rt does not run (ort-shapes.ts): the compiler refuses the model, and ORT's
  // replay still follows it, so python-ort and node-ort keep their activation and eval-set
  // terms. Without ort-shapes.ts the replay threw at the first of them and both terms were 0.
  it("replays a model of ops memlane-rt does not run, and keeps ORT's terms", async () => {
    const onnx = writeModel(ORT_ONLY_OPS, "ort-only-ops", dir);
    await expect(compileOnnx(onnx, path.join(dir, "ort-only-ops.mlplan"))).rejects.toThrow(/ScatterND/);
    const simulated = ortPatternBytesPerSample(loadOnnx(onnx)) * 64;
    const measured = await ortPatternBytes(onnx, 64);
    expect(Math.abs(simulated - measured) / measured, `simulated ${simulated} B, ORT ${measured} B`).toBeLessThan(0.01);
    const t = await modelTerms(onnx);
    expect(t.compileError).toMatch(/ScatterND/);
    expect([activationsUnknown(t, "python-ort"), activationsUnknown(t, "native")]).toEqual([null, t.compileError]);
    // outputs a sample: probs 4 + top 5 floats + scattered 4 floats; the input 8·12·12 floats
    expect(t.outputTensorsPerSampleMiB!.map((m) => m * 2 ** 20)).toEqual([16, 20, 16]);
    expect(t.ioPerSampleMiB! * 2 ** 20).toBe(8 * 12 * 12 * 4 + 52);
    expect(features("python-ort", t, { maxBatch: 64, evalSamples: 16 }).activationMiB).toBeGreaterThan(0);
  }, 120_000);
});
