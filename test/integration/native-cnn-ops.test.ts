/**
 * memlane-rt's CNN ops and LSTM end to end: blocks in the shape of mobilenet_v2/v3,
 * efficientnet, shufflenet_v2, squeezenet, densenet and googlenet (their Concats in place), a reflect-padded conv, Split + Concat, 1-D convs and pools,
 * Resize (nearest, linear and cubic, rewritten into MatMuls), the exponential activations and
 * PReLU, a U-Net decoder's transposed convs, and batch_first LSTMs and GRUs
 * (make_cnn_models.py), exported by both torch exporters, compiled and run through
 * memlane-rt over real ZeroMQ, must match ONNX Runtime within 1e-4 of each output's scale.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { concatInputsInPlace } from "../../src/compiler/concat-in-place.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { workerSpecs } from "../../src/workers/specs.ts";
import { rtBuilt } from "../fixtures/rt-built.ts";
import type { WorkerHandle } from "../../src/workers/handle.ts";
import { REPO_ROOT, pythonPath } from "../fixtures/onnx/models.ts";
import { ortSession } from "../fixtures/ort-session.ts";

const BUILT = rtBuilt("native-cnn-ops");

const EXPECTED = [
  "mbv2-block", "mbv3-block", "mbconv-silu", "shuffle-block", "pad-block", "split-concat", "fire-blocks", "dense-blocks", "inception-block", "conv1d-block", "resize-block", "resize-cubic", "activations-block", "unet-decoder", "lstm-bf", "lstm-bf-bidir", "lstm-bf-2layers", "slstm-residual", "gru-bf", "gru-bidir-2layers", "gru-seq-first",
].flatMap((m) => [`${m}-legacy.onnx`, `${m}-dynamo.onnx`]).concat("resize-cubic-exclude.onnx");

const dir = mkdtempSync(join(tmpdir(), "memlane-cnn-ops-"));
let manifest: Record<string, { inputShape: number[] }> = {};
let sup: Supervisor;
let worker: WorkerHandle;

/** Deterministic inputs in [-2, 2). */
function inputs(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    a[i] = (s / 2 ** 32) * 4 - 2;
  }
  return a;
}

/** max |got - want| over max(1, max |want|): the error relative to the output's scale. */
function scaledDiff(got: Float32Array, want: Float32Array): number {
  expect(got.length).toBe(want.length);
  let d = 0, scale = 1;
  for (let i = 0; i < want.length; i++) {
    const e = Math.abs(got[i]! - want[i]!);
    if (!(e <= d)) d = e;
    scale = Math.max(scale, Math.abs(want[i]!));
  }
  return d / scale;
}

describe.skipIf(!BUILT)("memlane-rt vs ONNX Runtime on CNN blocks and LSTMs from both exporters", () => {
  beforeAll(async () => {
    // Asynchronously: the exports take a minute or more, and a blocked event loop stalls vitest's RPC.
    await promisify(execFile)(pythonPath(), [join(REPO_ROOT, "test/fixtures/onnx/make_cnn_models.py"), dir], {
      env: { ...process.env, PYTHONWARNINGS: "ignore" }, maxBuffer: 64 << 20,
    });
    manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 500 } });
    worker = await sup.spawn(workerSpecs.memlaneRt({ args: ["--device", "cpu", "--threads", "2"] }));
  }, 600_000);
  afterAll(async () => {
    await sup?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("exported every model with both exporters", () => {
    expect(Object.keys(manifest).sort()).toEqual([...EXPECTED].sort());
  });

  it.each(EXPECTED)("%s matches within 1e-4 of the output scale (batches 1 and 3)", async (file) => {
    const onnx = join(dir, file);
    const plan = join(dir, file.replace(/\.onnx$/, ".mlplan"));
    const summary = await compileOnnx(onnx, plan);
    // The fusions and rewrites under test show in the plan's ops.
    if (file.startsWith("mbconv-silu")) expect(summary.opCounts.SiLU).toBe(3);
    if (file.startsWith("lstm")) expect(summary.opCounts.LSTM).toBe(file.includes("2layers") ? 2 : 1);
    if (file.startsWith("mbv3")) expect(summary.opCounts.HardSwish).toBe(3);
    // 1-D windows run as 2-D ones between Reshapes (three convs, two pools)
    if (file.startsWith("conv1d")) expect([summary.opCounts.Conv, summary.opCounts.MaxPool, summary.opCounts.AveragePool]).toEqual([3, 1, 1]);
    // Resize as MatMuls by interpolation matrices: no Resize op reaches the plan
    if (file.startsWith("resize")) expect([summary.opCounts.Resize, summary.opCounts.MatMul! >= (file.includes("exclude") ? 2 : 6)]).toEqual([undefined, true]);
    // Concat inputs written in their slices of the output (concat-in-place.ts), so no Concat of
    // the fire and dense blocks copies; the inception block copies two: an 8-channel branch of
    // 23x23 ends off the 64-byte grid, and the branch read twice lies in its first slot only.
    if (/^(fire|dense|inception)/.test(file)) {
      const h = readPlan(plan).header;
      expect(h.arena.concatInPlace).toBe(true);
      const slots = h.ops.filter((o) => o.op === "Concat").reduce((a, o) => a + o.inputs.length, 0);
      expect(slots - concatInputsInPlace(h).length).toBe(file.startsWith("inception") ? 2 : 0);
    }
    const loaded = await worker.run("load", { model: plan, maxBatch: 4, device: "cpu" });
    const inName = (loaded.value.inputs as { name: string }[])[0]!.name;
    const shape0 = manifest[file]!.inputShape;
    const per = shape0.slice(1).reduce((a, d) => a * d, 1);
    const sess = await ortSession(onnx, { intraOpNumThreads: 1 });
    try {
      for (const n of [1, 3]) {
        const shape = [n, ...shape0.slice(1)];
        const x = inputs(n * per, n * 131 + file.length);
        const r = await worker.run("run", {}, { tensors: { [inName]: { dtype: "float32", shape, data: x } } });
        const got = Object.values(r.tensors)[0]!;
        expect(got.shape[0]).toBe(n);
        const want = (await sess.run({ [sess.inputNames[0]!]: new ort.Tensor("float32", x, shape) }))[sess.outputNames[0]!]!;
        expect(got.shape).toEqual([...want.dims]);
        const d = scaledDiff(got.data as Float32Array, want.data as Float32Array);
        expect(d, `${file} batch ${n}: scaled diff ${d}`).toBeLessThanOrEqual(1e-4);
      }
    } finally {
      await sess.release();
    }
  });
});
