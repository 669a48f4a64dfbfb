// The estimate of a quantized model (int8 through onnxruntime.quantization, the way users
// shrink a model for a CPU) against ONNX Runtime itself: the block its arena is asked for on the
// second request (test/fixtures/ort_pattern_size.py) and the replay's pattern at the same batch
// (src/estimate/ort-qdq.ts, ort-quant-dynamic.ts, ort-nhwc.ts, ort-shapes-quantized.ts). Before
// these, such a model had no activation or eval-set terms: memlane's compiler refuses its ops,
// and a QDQ mobilenet_v2 at compare's batches 1,64 was estimated 82 % under.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { activationsUnknown, modelTerms } from "../../src/estimate/model-terms.ts";
import { ortRunTracePerSample, patternBytesAtBatch } from "../../src/estimate/ort-pattern.ts";
import { pythonPath, REPO_ROOT } from "../fixtures/onnx/models.ts";
import { ortPatternBytes } from "../fixtures/ort-pattern-size.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-ort-quantized-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const KINDS = ["qdq-cnn", "qdq-s8-cnn", "qdq-u16-cnn", "qop-cnn", "dynamic-transformer"] as const;
const model = (kind: string) => path.join(dir, `${kind}.onnx`);

beforeAll(async () => {
  for (const kind of KINDS) await promisify(execFile)(pythonPath(), [path.join(REPO_ROOT, "test/fixtures/quantized_model.py"), model(kind), kind]);
}, 300_000);

describe("a quantized model's memory pattern, replayed as ORT runs it", () => {
  // The CNN: uint8 maps a byte an element, each DequantizeLinear -> op -> QuantizeLinear group one
  // kernel, channels-last from the first conv to the classifier. The QDQ file's replay was 6.6x
  // ORT's block before the groups were fused; QOperator's (fused in the file) came out exact.
  // qdq-s8-cnn, quantize_static's default int8 activations: the residual's shared input stays
  // int8, so ORT runs the convs reading it in float, their weights dequantized in every request
  // (ort-qdq.ts activationTypes). Replayed as the uint8 model's groups, its block was 0.13x ORT's
  // on a ResNet-18. qdq-u16-cnn, 16-bit activations: no group fuses on the CPU, every tensor
  // between them 2 bytes an element (replayed as 8-bit groups, a ResNet-18's block was 0.15x ORT's).
  it.each([["qdq-cnn", 1], ["qdq-cnn", 16], ["qdq-s8-cnn", 16], ["qdq-u16-cnn", 16], ["qop-cnn", 16]] as const)("%s at batch %i: the block ORT asks for, exactly", async (kind, batch) => {
    const replayed = patternBytesAtBatch(ortRunTracePerSample(loadOnnx(model(kind), { customDomains: "keep" })), batch);
    expect(replayed).toBe(await ortPatternBytes(model(kind), batch));
  }, 120_000);

  // Two BERT-style blocks through quantize_dynamic: each Linear is one DynamicQuantizeMatMul, or
  // a MatMulIntegerToFloat where three share their 8-bit input. Unfused, the replay carried an
  // int32 product and two float copies of every projection's output (1.5x ORT's block on a
  // dynamically quantized DistilBERT at batch 8). What is left: ORT's block is 1.18x the replay's here
  // (at batch 16), a difference not found yet, though the same blocks in float come out
  // exact.
  it("dynamic-transformer at batch 16: ORT's DynamicQuantizeMatMul and MatMulIntegerToFloat, within 20 %", async () => {
    const replayed = patternBytesAtBatch(ortRunTracePerSample(loadOnnx(model("dynamic-transformer"), { customDomains: "keep" })), 16);
    const measured = await ortPatternBytes(model("dynamic-transformer"), 16);
    expect(Math.abs(replayed - measured) / measured, `replayed ${replayed} B, ORT ${measured} B`).toBeLessThan(0.2);
  }, 120_000);
});

describe("a quantized model's estimate terms", () => {
  it("has ORT's activations and eval set though memlane-rt refuses it, and weights at a byte an int8 element", async () => {
    for (const kind of KINDS) {
      const t = await modelTerms(model(kind), {});
      expect(t.compileError, kind).toMatch(/cannot run|custom domain/);
      expect(activationsUnknown(t, "python-ort"), kind).toBeNull();
      expect(t.outputPerSampleMiB, kind).toBeGreaterThan(0);
      // int8 weights, int32 biases, float scales: the file's bytes, not int64's 8 an element
      expect(t.weightMiB * 2 ** 20, kind).toBeLessThan(statSync(model(kind)).size);
    }
  }, 120_000);
});
