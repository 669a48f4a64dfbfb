// ORT's CPU arena replayed (src/estimate/bfc-arena.ts, ort-arena.ts) against ONNX Runtime
// itself: real zoo exports run as the python-ort worker runs them (test/fixtures/ort_arena_run.py:
// each batch size's first request without a pattern, then with it), the regions ORT's arena
// takes read from its verbose log, beside the regions the replay of the simulated trace takes.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { evalChunks, ortPatternKey, replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { HAS_AVX512F } from "../fixtures/cpu-flags.ts";
import { ortRunTracePerSample } from "../../src/estimate/ort-pattern.ts";
import { pythonPath, REPO_ROOT } from "../fixtures/onnx/models.ts";
import { exportZooArchs } from "../fixtures/zoo-export.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-ort-arena-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const ARCHS = ["resnet-mini", "digits-cnn"] as const;

beforeAll(async () => {
  await exportZooArchs(dir, ARCHS, "ort-arena-export");
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/nchwc_model.py"), path.join(dir, "nchwc.onnx")]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/two_input_model.py"), path.join(dir, "two-inputs.onnx")]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/lstm_model.py"), path.join(dir, "lstm.onnx")]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/masked_attention_model.py"), path.join(dir, "masked.onnx")]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/lstm_model.py"), path.join(dir, "bilstm.onnx"), "--bidirectional"]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/lstm_model.py"), path.join(dir, "gru.onnx"), "--gru"]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/lstm_model.py"), path.join(dir, "bigru.onnx"), "--gru", "--bidirectional"]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/audio_conv_model.py"), path.join(dir, "audio.onnx")]);
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/run_time_index_model.py"), path.join(dir, "run-time-index.onnx")]);
}, 600_000);

/**
 * The sizes of the regions ORT's arena took, in order; `seq`: every symbolic dim but the batch;
 * `evalSamples`: then an eval pass keeping its outputs, as python-ort's worker runs it.
 */
async function ortRegions(onnx: string, batches: readonly number[], seq = 1, evalSamples = 0): Promise<number[]> {
  const { stderr } = await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/ort_arena_run.py"), onnx, batches.join(","), String(seq), String(evalSamples)], { maxBuffer: 64 << 20 });
  return [...stderr.matchAll(/Extended allocation by (\d+) bytes/g)].map((m) => Number(m[1]));
}

describe("ORT's CPU arena, replayed from the simulated trace", () => {
  it.each([["resnet-mini", [1, 64]], ["resnet-mini", [1, 8, 256]], ["digits-cnn", [1, 256]]] as const)("%s at batches %j: the regions ORT takes", async (arch, batches) => {
    const onnx = path.join(dir, `${arch}.onnx`);
    const replay = replayOrtArena(ortRunTracePerSample(loadOnnx(onnx)), batches);
    expect(replay.regions).toEqual(await ortRegions(onnx, batches));
    // Pages written, at most the regions; and each region's handle table, 1/32 of it.
    const regionBytes = replay.regions.reduce((a, b) => a + b, 0);
    expect(replay.residentBytes - replay.handleTableBytes).toBeLessThanOrEqual(regionBytes);
    expect(replay.handleTableBytes).toBe(regionBytes / 32);
  }, 120_000);

  // Two inputs of one shape (input_ids and attention_mask): ORT's pattern key (the XOR of the
  // input dims) is the same at every batch size, so batch 64 runs tensor by tensor beside batch
  // 1's block. Replayed as if each shape had its own pattern, batch 64's block took a 32 MiB
  // region ORT never takes (1, 16, 16, 32 MiB), and 64 and 128 MiB more over 1, 8, 256.
  it.each([[[1, 64]], [[1, 8, 256]]] as const)("two inputs of one shape at batches %j: the regions ORT takes", async (batches) => {
    const onnx = path.join(dir, "two-inputs.onnx");
    const dims = [[-1, 128, 96], [-1, 128, 96]];
    expect(batches.map((b) => ortPatternKey(dims, b))).toEqual(batches.map(() => 0));
    const trace = ortRunTracePerSample(loadOnnx(onnx));
    const keyed = replayOrtArena(trace, batches, (b) => ortPatternKey(dims, b));
    const ort = await ortRegions(onnx, batches);
    expect(keyed.regions).toEqual(ort);
    expect(replayOrtArena(trace, batches).regions).not.toEqual(ort);
  }, 120_000);

  // torch's nn.LSTM export: layout 0 LSTMs, which ORT runs as they are (ort-lstm.ts), and whose
  // kernel asks the arena for its input projections ([S, N, 4H]) outside the pattern in every
  // request. Without those the replay took regions of 1, 2 and 4 MiB at batches 1, 64 (seq 40)
  // where ORT takes 1, 2, 4 and 8; before the layout 0 shape rule it could not follow the graph.
  it.each([["lstm", [1, 64], 40], ["bilstm", [1, 8, 256], 16], ["bilstm", [1, 64], 40]] as const)("torch's %s at batches %j, seq %d: the regions ORT takes", async (name, batches, seq) => {
    const onnx = path.join(dir, `${name}.onnx`);
    const trace = ortRunTracePerSample(loadOnnx(onnx), { x: [-1, seq, 32] });
    expect(trace.some((e) => e.kind === "alloc" && e.scratch)).toBe(true);
    expect(replayOrtArena(trace, batches).regions).toEqual(await ortRegions(onnx, batches, seq));
  }, 120_000);

  // torch's nn.GRU the same way (ort-gru.ts): its input projections ([S, N, 3H]) and states,
  // the forward direction's still held while the backward one runs. Without them the replay put
  // a speech-sized bidirectional GRU's python-ort steady RSS 6.1 % under the measured one.
  it.each([["gru", [1, 64], 40], ["bigru", [1, 8, 256], 16], ["bigru", [1, 64], 40]] as const)("torch's %s at batches %j, seq %d: the regions ORT takes", async (name, batches, seq) => {
    const onnx = path.join(dir, `${name}.onnx`);
    const trace = ortRunTracePerSample(loadOnnx(onnx), { x: [-1, seq, 32] });
    expect(trace.some((e) => e.kind === "alloc" && e.scratch)).toBe(true);
    expect(replayOrtArena(trace, batches).regions).toEqual(await ortRegions(onnx, batches, seq));
  }, 120_000);

  // A transformer's attention mask, Where(mask [N, 1, S, S], 0, -10000): ORT's Where selects
  // into two tensors of the mask's size before its output (ort-scratch.ts). At batch 64, then
  // an eval pass of 256, the replay without them took regions of 1, 2 and 4 MiB where ORT takes
  // 1, 2, 4 and 8.
  it("a masked attention (Where over the mask) at batch 64 and an eval pass: the regions ORT takes", async () => {
    const onnx = path.join(dir, "masked.onnx");
    const trace = ortRunTracePerSample(loadOnnx(onnx));
    expect(trace.filter((e) => e.kind === "alloc" && e.scratch).length).toBe(2);
    const evalPass = { chunks: evalChunks(256, 64), holdOutputs: true };
    expect(replayOrtArena(trace, [64], undefined, evalPass).regions).toEqual(await ortRegions(onnx, [64], 1, 256));
  }, 120_000);

  // python-ort's eval pass keeps every chunk's outputs (numpy views of ORT's arena) until it joins
  // them: 32 chunks of 8 here, 18.5 KiB of outputs each (0.6 MiB in all), which take the arena
  // one more region; replayed as if each went back after its request, that region was missing.
  it("torch's lstm, then an eval pass of 256 samples keeping its outputs: the regions ORT takes", async () => {
    const onnx = path.join(dir, "lstm.onnx");
    const trace = ortRunTracePerSample(loadOnnx(onnx), { x: [-1, 40, 32] });
    const ort = await ortRegions(onnx, [1, 8], 40, 256);
    const chunks = evalChunks(256, 8);
    expect(replayOrtArena(trace, [1, 8], undefined, { chunks, holdOutputs: true }).regions).toEqual(ort);
    expect(replayOrtArena(trace, [1, 8], undefined, { chunks, holdOutputs: false }).regions).not.toEqual(ort);
  }, 120_000);

  // wav2vec2's feature extractor (audio_conv_model.py): ORT runs each 1-D Conv and the
  // InstanceNormalization as one kernel, and the Unsqueeze of the waveform is a view of the
  // caller's tensor. Replayed through the compiler's rewrites (Reshapes around every 1-D Conv, a
  // LayerNormalization, Mul and Add for the norm) and with a buffer for the view, the real model
  // took regions of 1, 8, 8, 16, 32 and 64 MiB at batches 1, 2 where ORT takes 8, 8, 16 and 32,
  // and python-ort's steady RSS was estimated +27.8 %.
  it.each([[[1, 2]], [[1, 4]]] as const)("wav2vec2's 1-D conv feature extractor at batches %j: the regions ORT takes", async (batches) => {
    const onnx = path.join(dir, "audio.onnx");
    const trace = ortRunTracePerSample(loadOnnx(onnx));
    expect(replayOrtArena(trace, batches).regions).toEqual(await ortRegions(onnx, batches));
  }, 120_000);

  // ORT's NCHWc layout pads 24 channels to 32 and copies between layouts (ort-nchwc.ts); without
  // the rewrite the replay took regions of 1, 32 and 32 MiB where ORT takes 1, 2, 32, 32 and 64.
  it.skipIf(!HAS_AVX512F)("a CNN whose tensors ORT pads and reorders (NCHWc, AVX-512): the regions ORT takes", async () => {
    const onnx = path.join(dir, "nchwc.onnx");
    const batches = [1, 64];
    expect(replayOrtArena(ortRunTracePerSample(loadOnnx(onnx)), batches).regions).toEqual(await ortRegions(onnx, batches));
  }, 120_000);

  // An index built from Shape(x) at run time (BEiT's relative-position bias; ort-run-time.ts):
  // ORT computes it and the bias gathered by it in every request, 7.6 MiB in 9 tensors that do
  // not grow with the batch; memlane's compiler folds them. Without them the replay took regions
  // of 2, 2, 4 MiB at batch 1 where ORT takes 2, 2, 4, 8, and 2, 2, 4, 16, 16, 32 over batches
  // 1, 8 where ORT takes 2, 2, 4, 8, 16, 32.
  it.each([[[1]], [[1, 8]], [[1, 8, 64]]] as const)("an index ORT computes from the input's shape at batches %j: the regions ORT takes", async (batches) => {
    const onnx = path.join(dir, "run-time-index.onnx");
    const trace = ortRunTracePerSample(loadOnnx(onnx));
    expect(trace.some((e) => e.kind === "alloc" && e.fixed)).toBe(true);
    expect(replayOrtArena(trace, batches).regions).toEqual(await ortRegions(onnx, batches));
  }, 120_000);
});
