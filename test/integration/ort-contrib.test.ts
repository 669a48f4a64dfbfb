// A BERT fused offline by ONNX Runtime's transformer optimizer (com.microsoft's
// EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu: the file users ready for
// ORT) estimated against ORT itself: the block its arena is asked for on the second request
// (test/fixtures/ort_pattern_size.py) and the replay's pattern (src/estimate/ort-shapes-contrib.ts).
// Before the contrib ops' shape rules the replay could not follow such a graph, and the ORT
// runtimes' estimate had no activation or eval-set terms.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { activationsUnknown, fedInputShapes, modelTerms } from "../../src/estimate/model-terms.ts";
import { ortRunTracePerSample, patternBytesAtBatch } from "../../src/estimate/ort-pattern.ts";
import { pythonPath, REPO_ROOT } from "../fixtures/onnx/models.ts";
import { ortPatternBytes } from "../fixtures/ort-pattern-size.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-ort-contrib-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const model = path.join(dir, "bert-ortopt.onnx");

beforeAll(async () => {
  await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/ort_optimized_bert.py"), model]);
}, 300_000);

describe("an ORT-optimized BERT", () => {
  it("has ORT's activations and eval set, though memlane-rt refuses its com.microsoft ops", async () => {
    const t = await modelTerms(model, {});
    expect(t.compileError).toMatch(/custom domain/);
    expect(activationsUnknown(t, "python-ort")).toBeNull();
    expect(t.outputPerSampleMiB).toBeCloseTo((128 * 128 * 4) / 2 ** 20, 9); // last_hidden_state [N, 128, 128]
  }, 120_000);

  // EmbedLayerNormalization reads its position ids from a Slice of run-time length; ORT still
  // knows its output's shape, so buffers are reused after it. Taken as unknown (no reuse), the
  // replay was 14 % under ORT's block.
  it("replays the block ORT asks for at batch 16 within 0.5 %", async () => {
    const replayed = patternBytesAtBatch(ortRunTracePerSample(loadOnnx(model, { customDomains: "keep" }), fedInputShapes(model, { seq: 128 })), 16);
    const measured = await ortPatternBytes(model, 16, 128);
    expect(Math.abs(replayed - measured) / measured, `replayed ${replayed} B, ORT ${measured} B`).toBeLessThan(0.005);
  }, 120_000);
});
