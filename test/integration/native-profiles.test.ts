/**
 * Shape profiles end to end (docs/plan-format.md, "Profiles"): a BERT-style encoder exported
 * with a dynamic batch and sequence length, compiled by `memlane compile --seq 16,32,64` into one
 * plan of three profiles, run by the real memlane-rt worker at each length (`load` + `run`, and
 * `infer.native`) against ONNX Runtime within 1e-4 relative; another length is refused with the
 * list of profiles; the three profiles hold the weights once and the largest arena.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execute } from "../../src/cli/commands/compile.ts";
import type { Io } from "../../src/cli/io.ts";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { sharedWeightBytes } from "../../src/compiler/merge-profiles.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { memlaneRtBinary, workerSpecs } from "../../src/workers/specs.ts";
import type { WorkerHandle } from "../../src/workers/handle.ts";
import { pythonPath } from "../fixtures/onnx/models.ts";
import { relDiff } from "../fixtures/rel-diff.ts";

let BUILT = true;
try {
  memlaneRtBinary();
} catch (e) {
  BUILT = false;
  console.warn(`native-profiles: skipped: ${(e as Error).message}`);
}

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "../fixtures/onnx/make_seq_model.py");
const SEQS = [16, 32, 64];
const dir = mkdtempSync(join(tmpdir(), "memlane-profiles-"));
const plan = join(dir, "seq-encoder.mlplan");
let manifest: { onnx: string; batch: number; outputWidth: number };
let sup: Supervisor;
let rt: WorkerHandle;

const bytes = (name: string) => {
  const b = readFileSync(join(dir, name));
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
};

/** `input:ids` and `input:mask` of the batch made for `seq`, batch first. */
const tensors = (seq: number) => ({
  "input:ids": { dtype: "int64" as const, shape: [manifest.batch, seq], data: new BigInt64Array(bytes(`seq${seq}.ids.bin`)) },
  "input:mask": { dtype: "int64" as const, shape: [manifest.batch, seq], data: new BigInt64Array(bytes(`seq${seq}.mask.bin`)) },
});

describe.skipIf(!BUILT)("shape profiles: one plan, three sequence lengths, the real memlane-rt worker", () => {
  const printed: string[] = [];
  beforeAll(async () => {
    execFileSync(pythonPath(), [SCRIPT, dir, SEQS.join(",")], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, PYTHONWARNINGS: "ignore" } });
    manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    const io: Io = { out: (l) => printed.push(l), err: (l) => printed.push(l), isTTY: false, redraw: () => {}, columns: 100 };
    expect(await execute([join(dir, manifest.onnx), "-o", plan, "--seq", SEQS.join(",")], io)).toBe(0);
    sup = await Supervisor.start();
    rt = await sup.spawn(workerSpecs.memlaneRt({ args: ["--device", "cpu", "--threads", "1"] }));
  }, 300_000);
  afterAll(async () => {
    await sup?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("memlane compile --seq writes one plan of three profiles whose weights are stored once", () => {
    expect(printed.join("\n")).toMatch(/stored once for 3 profiles/);
    expect(printed.filter((l) => /^profile \d: ids \[N, (16|32|64)\], mask \[N, \1\] → logits \[N, \1, 8\]$/.test(l))).toHaveLength(3);
    const p = readPlan(plan);
    expect(p.profiles.map((h) => h.inputs.map((id) => h.tensors[id]!.shape))).toEqual(SEQS.map((s) => [[-1, s], [-1, s]]));
    // The shared weights (every Linear, LayerNorm and the token table) are in the blob once: it is
    // smaller than the three profiles' weights side by side.
    const perProfile = p.profiles.map((h) => h.tensors.filter((t) => t.kind === "weight").reduce((a, t) => a + t.bytes, 0));
    expect(p.blob.length).toBeLessThan(perProfile[2]! + perProfile[0]!);
  });

  it.each(SEQS)("seq %i: load + run picks the matching profile and matches ONNX Runtime", async (seq) => {
    const loaded = await rt.run("load", { model: plan, maxBatch: 4, device: "cpu" });
    expect((loaded.value.profiles as unknown[]).length).toBe(3);
    const r = await rt.run("run", {}, { tensors: tensors(seq) });
    const got = r.tensors["output:logits"]!;
    expect(got.shape).toEqual([manifest.batch, seq, manifest.outputWidth]);
    const diff = relDiff(got.data as Float32Array, new Float32Array(bytes(`seq${seq}.logits.bin`)));
    expect(diff, `seq ${seq}: relative diff ${diff}`).toBeLessThanOrEqual(1e-4);
  });

  it("one loaded plan serves the lengths in any order, and refuses another naming every profile", async () => {
    await rt.run("load", { model: plan, maxBatch: 4, device: "cpu" });
    for (const seq of [64, 16, 32, 16]) {
      const r = await rt.run("run", {}, { tensors: tensors(seq) });
      expect(relDiff(r.tensors["output:logits"]!.data as Float32Array, new Float32Array(bytes(`seq${seq}.logits.bin`)))).toBeLessThanOrEqual(1e-4);
    }
    const t = tensors(16);
    const other = {
      "input:ids": { ...t["input:ids"], shape: [3, 24], data: new BigInt64Array(72).fill(1n) },
      "input:mask": { ...t["input:mask"], shape: [3, 24], data: new BigInt64Array(72).fill(1n) },
    };
    await expect(rt.run("run", {}, { tensors: other })).rejects.toThrow(
      "inputs ids [3,24], mask [3,24] match none of the plan's 3 shape profiles (#0 ids [N,16], mask [N,16]; #1 ids [N,32], mask [N,32]; #2 ids [N,64], mask [N,64]; N = any batch)",
    );
  });

  it("infer.native runs the profile its inputs match (args.io of that profile)", async () => {
    const io = { inputs: ["ids", "mask"].map((name) => ({ name, dtype: "int64", shape: [-1, 32], batchAxis: 0 })), outputs: [{ name: "logits" }] };
    const r = await rt.run("infer.native", { model: plan, batchSizes: [1, 3], iterations: 2, warmup: 0, threads: 1, device: "cpu", io }, { tensors: tensors(32) });
    expect(relDiff(r.tensors["output:logits"]!.data as Float32Array, new Float32Array(bytes("seq32.logits.bin")))).toBeLessThanOrEqual(1e-4);
    const wrong = { ...io, inputs: io.inputs.map((i) => ({ ...i, shape: [-1, 24] })) };
    await expect(rt.run("infer.native", { model: plan, batchSizes: [1], iterations: 1, device: "cpu", io: wrong }, { tensors: tensors(32) })).rejects.toThrow(
      /input 'ids': the plan was compiled for shape \[-1,16\] or \[-1,32\] or \[-1,64\], args\.io says \[-1,24\]/,
    );
  });

  it("three profiles hold the weights once and the largest arena: as much as the longest profile alone", async () => {
    const single = join(dir, "seq64.mlplan");
    await compileOnnx(join(dir, manifest.onnx), single, { inputShapes: { ids: [-1, 64], mask: [-1, 64] } });
    const one = await rt.run("load", { model: single, maxBatch: 4, device: "cpu" });
    const three = await rt.run("load", { model: plan, maxBatch: 4, device: "cpu" });
    expect(three.value.arenaBytes).toBe(one.value.arenaBytes);
    expect(three.value.workspaceBytes).toBe(one.value.workspaceBytes);
    // Weights: each distinct one once; the two shorter profiles add only their own positions.
    expect(three.value.weightsBytes).toBe(sharedWeightBytes(readPlan(plan).profiles));
    expect(three.value.weightsBytes).toBeLessThan(2 * (one.value.weightsBytes as number));
  });
});
