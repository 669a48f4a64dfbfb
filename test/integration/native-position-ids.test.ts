/**
 * CumSum and GatherElements end to end (test/fixtures/onnx/make_position_models.py): a tiny
 * transformers RobertaModel from torch's legacy exporter (its position ids are cumsum(ids !=
 * pad), its token types a GatherElements from a buffer expanded to the batch), padded ids of
 * five lengths, and a hand-made graph with CumSum's exclusive/reverse flags and negative
 * GatherElements indices; compiled, run by memlane-rt through infer.native, and compared with
 * ONNX Runtime on the original model within 1e-4 of each output's scale.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { memlaneRtBinary, workerSpecs } from "../../src/workers/specs.ts";
import type { WorkerHandle } from "../../src/workers/handle.ts";
import { REPO_ROOT, pythonPath } from "../fixtures/onnx/models.ts";
import { relDiff } from "../fixtures/rel-diff.ts";

let BUILT = true;
try {
  memlaneRtBinary();
} catch (e) {
  BUILT = false;
  console.warn(`native-position-ids: skipped: ${(e as Error).message}`);
}

interface Entry {
  onnx: string;
  inputs: Record<string, { dtype: "float32" | "int64"; shape: number[]; rows: number }>;
  outputs: Record<string, { shape: number[] }>;
}

const SCRIPT = join(REPO_ROOT, "test/fixtures/onnx/make_position_models.py");
const dir = mkdtempSync(join(tmpdir(), "memlane-position-ids-"));
let manifest: Record<string, Entry> = {};
let sup: Supervisor;
let rt: WorkerHandle;

const bytes = (name: string) => {
  const b = readFileSync(join(dir, name));
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
};

/** `input:<name>` wire tensors, batch first, in each input's dtype. */
function inputTensors(model: string) {
  return Object.fromEntries(Object.entries(manifest[model]!.inputs).map(([n, s]) => {
    const raw = bytes(`${model}.${n}.bin`);
    const data = s.dtype === "int64" ? new BigInt64Array(raw) : new Float32Array(raw);
    return [`input:${n}`, { dtype: s.dtype, shape: [s.rows, ...s.shape.slice(1)], data }];
  }));
}

const ioArg = (model: string) => ({
  inputs: Object.entries(manifest[model]!.inputs).map(([name, s]) => ({ name, dtype: s.dtype, shape: s.shape, batchAxis: 0 })),
  outputs: Object.keys(manifest[model]!.outputs).map((name) => ({ name })),
});

/** The legacy export leaves the sequence symbolic: fixed here at the fixture's 8. */
const SHAPES: Record<string, Record<string, number[]> | undefined> = {
  "roberta-tiny": { input_ids: [-1, 8], attention_mask: [-1, 8] },
  "cumsum-gather-elements": undefined,
};

describe.skipIf(!BUILT)("CumSum and GatherElements on memlane-rt match ONNX Runtime", () => {
  beforeAll(async () => {
    execFileSync(pythonPath(), [SCRIPT, dir], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, PYTHONWARNINGS: "ignore" } });
    manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    sup = await Supervisor.start();
    rt = await sup.spawn(workerSpecs.memlaneRt({ args: ["--device", "cpu", "--threads", "2"] }));
  }, 300_000);
  afterAll(async () => {
    await sup?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(Object.keys(SHAPES))("%s", async (model) => {
    const plan = join(dir, `${model}.mlplan`);
    await compileOnnx(join(dir, manifest[model]!.onnx), plan, SHAPES[model] && { inputShapes: SHAPES[model] });
    const ops = readPlan(plan).header.ops.map((o) => o.op);
    expect(ops).toContain("CumSum");
    expect(ops).toContain("GatherElements");
    // Batch 8 > the 5 rows: tiled; the outputs cover the rows in chunks of 8.
    const r = await rt.run("infer.native", { model: plan, batchSizes: [2, 8], iterations: 2, warmup: 0, threads: 2, io: ioArg(model) }, { tensors: inputTensors(model) });
    for (const [name, spec] of Object.entries(manifest[model]!.outputs)) {
      const got = r.tensors[`output:${name}`];
      expect(got, `output:${name}`).toBeDefined();
      expect(got!.shape).toEqual(spec.shape);
      const diff = relDiff(got!.data as Float32Array, new Float32Array(bytes(`${model}.${name}.bin`)));
      expect(diff, `${model} ${name}: relative diff ${diff}`).toBeLessThanOrEqual(1e-4);
    }
  });
});
