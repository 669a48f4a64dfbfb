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
import { ortPatternKey, replayOrtArena } from "../../src/estimate/ort-arena.ts";
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
}, 600_000);

/** The sizes of the regions ORT's arena took, in order. */
async function ortRegions(onnx: string, batches: readonly number[]): Promise<number[]> {
  const { stderr } = await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/ort_arena_run.py"), onnx, batches.join(",")], { maxBuffer: 64 << 20 });
  return [...stderr.matchAll(/Extended allocation by (\d+) bytes/g)].map((m) => Number(m[1]));
}

describe("ORT's CPU arena, replayed from the simulated trace", () => {
  it.each([["resnet-mini", [1, 64]], ["resnet-mini", [1, 8, 256]], ["digits-cnn", [1, 256]]] as const)("%s at batches %j: the regions ORT takes", async (arch, batches) => {
    const onnx = path.join(dir, `${arch}.onnx`);
    const replay = replayOrtArena(ortRunTracePerSample(loadOnnx(onnx)), batches);
    expect(replay.regions).toEqual(await ortRegions(onnx, batches));
    expect(replay.residentBytes).toBeLessThanOrEqual(replay.regions.reduce((a, b) => a + b, 0));
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

  // ORT's NCHWc layout pads 24 channels to 32 and copies between layouts (ort-nchwc.ts); without
  // the rewrite the replay took regions of 1, 32 and 32 MiB where ORT takes 1, 2, 32, 32 and 64.
  it.skipIf(!HAS_AVX512F)("a CNN whose tensors ORT pads and reorders (NCHWc, AVX-512): the regions ORT takes", async () => {
    const onnx = path.join(dir, "nchwc.onnx");
    const batches = [1, 64];
    expect(replayOrtArena(ortRunTracePerSample(loadOnnx(onnx)), batches).regions).toEqual(await ortRegions(onnx, batches));
  }, 120_000);
});
