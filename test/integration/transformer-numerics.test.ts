/**
 * Transformer blocks exported from torch with both exporters (legacy at opset 17, dynamo at
 * opset 18; test/fixtures/onnx/make_transformer_models.py) through the compiler and
 * memlane-rt, against ONNX Runtime on the original model: each output within 1e-4 of the
 * output's scale (max |ORT|). The compiler's fusions are checked on the way: every block's
 * LayerNorms and Gelus, decomposed or not, must arrive as single ops. The same plans also go
 * back to ONNX (compiler-plan-to-onnx.ts) so that the compiler is checked where memlane-rt
 * is not built.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompileError, compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { workerSpecs } from "../../src/workers/specs.ts";
import { rtBuilt } from "../fixtures/rt-built.ts";
import type { WorkerHandle } from "../../src/workers/handle.ts";
import { REPO_ROOT, pythonPath } from "../fixtures/onnx/models.ts";
import { planToOnnx } from "./compiler-plan-to-onnx.ts";
import { ortSession } from "../fixtures/ort-session.ts";
import { relDiff } from "../fixtures/rel-diff.ts";

const TOL = 1e-4;
const SCRIPT = join(REPO_ROOT, "test/fixtures/onnx/make_transformer_models.py");
/** Blocks plan v1 must compile: batch-first attention written as BERT/GPT-2 write it, and timm's fused q, k and v. */
const MUST = ["encoder-postnorm", "encoder-prenorm", "gpt-block", "manual-layernorm", "fused-qkv"].flatMap((m) => [`${m}-legacy`, `${m}-dynamo`]);
/**
 * nn.TransformerEncoder stacks (seq-first and batch-first, pre/post-norm, 2 to 8 heads, 1 to 3
 * layers, lengths 5 to 12): the batch leaves axis 0 inside every one; all must compile and match.
 */
const STACKS = ["torch-stack-sf-postnorm-h2", "torch-stack-sf-prenorm-h8-s12", "torch-stack-bf-prenorm-l3", "torch-stack-bf-postnorm-s5-d48"]
  .flatMap((m) => [`${m}-legacy`, `${m}-dynamo`]);
/**
 * Blocks that must compile and match, their attention left unfused: timm's Swin-style windows,
 * merged into the batch before q, k and v are unbound (the Split's input is [windows·batch, 3, ...]).
 */
const UNFUSED = ["window-qkv"].flatMap((m) => [`${m}-legacy`, `${m}-dynamo`]);
/** The input's shape for a batch of n (inputShape has -1 at the batch axis). */
const shapeFor = (name: string, n: number) => manifest[name]!.inputShape!.map((d) => (d === -1 ? n : d));

interface Entry { onnx?: string; inputShape?: number[]; error?: string }

const BUILT = rtBuilt("transformer-numerics", "checking the plans through ONNX Runtime only");

const dir = mkdtempSync(join(tmpdir(), "memlane-transformer-"));
let manifest: Record<string, Entry> = {};

function inputs(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    a[i] = ((s / 2 ** 32) * 2 - 1) * 2;
  }
  return a;
}

async function ortRun(model: string | Uint8Array, x: Float32Array, shape: number[]): Promise<Float32Array> {
  const s = await ortSession(model, { intraOpNumThreads: 1 });
  try {
    const r = await s.run({ [s.inputNames[0]!]: new ort.Tensor("float32", x, shape) });
    return r[s.outputNames[0]!]!.data as Float32Array;
  } finally {
    await s.release();
  }
}

/** x of `shape` with its axis `axis` moved first (memlane-rt's protocol carries tensors batch first). */
function axisFirst(x: Float32Array, shape: number[], axis: number): Float32Array {
  if (axis === 0) return x;
  const outer = shape.slice(0, axis).reduce((a, b) => a * b, 1);
  const inner = shape.slice(axis + 1).reduce((a, b) => a * b, 1);
  const n = shape[axis]!;
  const y = new Float32Array(x.length);
  for (let o = 0; o < outer; o++)
    for (let b = 0; b < n; b++) y.set(x.subarray((o * n + b) * inner, (o * n + b + 1) * inner), (b * outer + o) * inner);
  return y;
}

/** Compile, or undefined (with the reason logged) for the models plan v1 cannot hold yet. */
async function compiled(name: string): Promise<string | undefined> {
  const e = manifest[name]!;
  if (e.error) throw new Error(`${name}: export failed: ${e.error}`);
  const plan = join(dir, `${name}.mlplan`);
  try {
    await compileOnnx(join(dir, e.onnx!), plan);
    return plan;
  } catch (err) {
    if (MUST.includes(name) || STACKS.includes(name) || UNFUSED.includes(name) || !(err instanceof CompileError)) throw err;
    console.warn(`transformer-numerics: ${name} does not compile in plan v1: ${err.message.slice(0, 160)}`);
    return undefined;
  }
}

beforeAll(async () => {
  // Asynchronously: a minute of torch export must not block vitest's worker RPC.
  await promisify(execFile)(pythonPath(), [SCRIPT, dir], { env: { ...process.env, PYTHONWARNINGS: "ignore" }, maxBuffer: 16 << 20 });
  manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Record<string, Entry>;
}, 600_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("transformer blocks: compiler", () => {
  it("exports every block with both exporters and fuses each LayerNorm, Gelu and attention into one op", async () => {
    for (const name of MUST) {
      const plan = await compiled(name);
      const ops = readPlan(plan!).header.ops.map((o) => o.op);
      const count = (op: string) => ops.filter((o) => o === op).length;
      expect(count("LayerNormalization"), `${name}: ${ops.join(" ")}`).toBe(2);
      expect(count("Gelu"), `${name}: ${ops.join(" ")}`).toBe(1);
      expect(count("Attention"), `${name}: ${ops.join(" ")}`).toBe(1);
      for (const gone of ["ReduceMean", "Pow", "Sqrt", "Erf", "Tanh", "Softmax"]) expect(ops, name).not.toContain(gone);
    }
  });

  it("nn.TransformerEncoder stacks keep their batch where torch puts it (axis 1 when seq-first)", async () => {
    for (const name of STACKS) {
      const header = readPlan((await compiled(name))!).header;
      const io = [...header.inputs, ...header.outputs].map((id) => header.tensors[id]!.shape);
      const want = manifest[name]!.inputShape!;
      for (const s of io) expect(s, name).toEqual(want);
      // The batch really sits elsewhere than axis 0 inside (MultiheadAttention's [S, B, E]).
      expect(header.tensors.some((t) => t.kind === "activation" && t.shape.indexOf(-1) > 0), name).toBe(true);
    }
  });

  it("each plan, turned back into ONNX, computes what the exported model computes", async () => {
    for (const name of Object.keys(manifest)) {
      const plan = await compiled(name);
      if (!plan) continue;
      const shape = shapeFor(name, 3);
      const x = inputs(shape.reduce((a, b) => a * b, 1), name.length);
      const d = relDiff(await ortRun(planToOnnx(readPlan(plan)), x, shape), await ortRun(join(dir, manifest[name]!.onnx!), x, shape), 1e-6);
      expect(d, `${name}: relative diff ${d}`).toBeLessThanOrEqual(TOL);
    }
  });
});

describe.skipIf(!BUILT)("transformer blocks: memlane-rt vs ONNX Runtime", () => {
  let sup: Supervisor;
  let worker: WorkerHandle;
  beforeAll(async () => {
    sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 500 } });
    worker = await sup.spawn(workerSpecs.memlaneRt({ args: ["--device", "cpu", "--threads", "2"] }));
  }, 120_000);
  afterAll(async () => {
    await sup?.close();
  });

  it("every block that compiles matches within 1e-4 of the output scale (batches 1, 2 and 5)", async () => {
    const diffs: Record<string, number> = {};
    for (const name of Object.keys(manifest)) {
      const plan = await compiled(name);
      if (!plan) continue;
      await worker.run("load", { model: plan, maxBatch: 8, device: "cpu" });
      let worst = 0;
      for (const n of [1, 2, 5]) {
        const shape = shapeFor(name, n);
        const x = inputs(shape.reduce((a, b) => a * b, 1), n * 7919 + name.length);
        // On the wire the batch comes first; the outputs have the input's layout here.
        const axis = manifest[name]!.inputShape!.indexOf(-1);
        const wire = [n, ...shape.filter((_, i) => i !== axis)];
        const r = await worker.run("run", {}, { tensors: { x: { dtype: "float32", shape: wire, data: axisFirst(x, shape, axis) } } });
        const got = Object.values(r.tensors)[0]!;
        expect(got.shape).toEqual(wire);
        const want = axisFirst(await ortRun(join(dir, manifest[name]!.onnx!), x, shape), shape, axis);
        worst = Math.max(worst, relDiff(got.data as Float32Array, want, 1e-6));
      }
      diffs[name] = worst;
    }
    console.log(`transformer-numerics: relative diff per model ${JSON.stringify(diffs)}`);
    for (const name of [...MUST, ...STACKS, ...UNFUSED]) expect(Object.keys(diffs)).toContain(name);
    for (const [name, d] of Object.entries(diffs)) expect(d, `${name}: relative diff ${d}`).toBeLessThanOrEqual(TOL);
  });
});
