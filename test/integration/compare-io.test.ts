// `memlane compare` on models with several inputs and outputs of several dtypes (an int64 ids
// input through a 1000-row embedding, an int64 mask, a float input; two outputs), exported with
// torch by make_io_models.py, through the real CLI and real workers; `--inputs` with an .npz;
// `--shape` usage errors; the exit status when runtimes fail; every unsupported op at once.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { indexBounds } from "../../src/pipeline/inputs/index-bounds.ts";
import { readOnnxIo } from "../../src/pipeline/inputs/onnx-io.ts";
import { resolveModelIo } from "../../src/pipeline/inputs/shapes.ts";
import { fixtureCacheDir } from "../fixtures/cache-dir.ts";
import { ensureModels, pythonPath } from "../fixtures/onnx/models.ts";
import { expectNoneLeft, ROOT, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-compare-io-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));
let dir = "";

/** make_io_models.py's output, cached in the temp dir under the script's hash (like models.ts). */
function ioModels(): string {
  const script = path.join(ROOT, "test/fixtures/onnx/make_io_models.py");
  const hash = createHash("sha256").update(readFileSync(script)).digest("hex").slice(0, 12);
  const dest = path.join(fixtureCacheDir(), `memlane-io-models-${hash}`);
  if (existsSync(path.join(dest, "manifest.json"))) return dest;
  const work = mkdtempSync(`${dest}-tmp-`);
  try {
    execFileSync(pythonPath(), [script, work], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, PYTHONWARNINGS: "ignore" } });
    try {
      renameSync(work, dest);
    } catch {
      if (!existsSync(path.join(dest, "manifest.json"))) throw new Error(`cannot install generated models in ${dest}`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dest;
}

beforeAll(() => void (dir = ioModels()), 300_000);

async function cli(args: string[], env: Record<string, string> = {}) {
  const c = startCli(args, env);
  const { code } = await c.exit;
  expect(await expectNoneLeft(c.tag), "processes left behind").toEqual([]);
  return { code, stdout: c.stdout(), stderr: c.stderr(), all: `stdout:\n${c.stdout()}\nstderr:\n${c.stderr()}` };
}

function f32(file: string): Float32Array {
  const b = readFileSync(file);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

function report(runs: string): { r: Report; runDir: string } {
  const ids = readdirSync(runs);
  expect(ids).toHaveLength(1);
  const runDir = path.join(runs, ids[0]!);
  return { r: JSON.parse(readFileSync(path.join(runDir, "report.json"), "utf8")) as Report, runDir };
}

describe("inputs of an ONNX model", () => {
  it("ids reaching a Gather are bounded by its vocabulary; the batch and seq dims resolve from the model's dim names", () => {
    const io = readOnnxIo(path.join(dir, "ids-mask-features.onnx"));
    expect(indexBounds(io).get("input_ids")?.bound).toBe(1000);
    expect(indexBounds(io).has("attention_mask")).toBe(false); // a mask multiplies, it indexes nothing
    const r = resolveModelIo(io, { shapes: { input_ids: ["N", 9] } });
    expect(r.inputs.map((i) => [i.name, i.dtype, i.shape, i.batchAxis])).toEqual([
      ["input_ids", "int64", [-1, 9], 0],
      ["attention_mask", "int64", [-1, 9], 0], // shares the dim "seq" with input_ids
      ["features", "float32", [-1, 8], 0],
    ]);
    expect(r.outputs.map((o) => [o.name, o.shape, o.batchAxis])).toEqual([["logits", [-1, 4], 0], ["hidden", [-1, 9, 16], 0]]);
    expect(r.staticBatch).toBeNull();
  });
  it("a bbox reaches its embeddings through a Gather that selects a coordinate: its ids are bounded by them", () => {
    const io = readOnnxIo(path.join(dir, "layout-boxes.onnx"));
    expect(indexBounds(io).get("bbox")?.bound).toBe(64);
    expect(indexBounds(io).get("input_ids")?.bound).toBe(100);
  });
});

describe("memlane compare, several inputs and outputs", () => {
  // both exporters: named dynamic axes ("batch", "seq"), and torch.export's own names ("s43"...)
  it.each(["ids-mask-features", "ids-mask-features-dynamo"])("%s: int64 ids + int64 mask + float input: python-ort and node-ort run, every output compared", { timeout: 120_000 }, async (name) => {
    const runs = path.join(out, name);
    const res = await cli(["compare", path.join(dir, `${name}.onnx`), "--batch", "1,4", "--seq", "10", "--iterations", "3", "-q", "-o", runs]);
    expect(res.code, res.all).toBe(0);
    const { r } = report(runs);
    const ran = r.runtimes.map((x) => x.name);
    expect(ran.slice(0, 2)).toEqual(["python-ort", "node-ort"]);
    expect(r.numerics.reference).toBe("python-ort");
    for (const rt of r.runtimes) {
      expect(rt.outputs!.map((o) => [o.name, o.shape])).toEqual([["logits", [256, 4]], ["hidden", [256, 10, 16]]]);
      if (rt.name === "python-ort") continue;
      for (const o of rt.outputs!) expect(o.maxAbsDiff!, `${rt.name} ${o.name}`).toBeLessThan(1e-4);
      expect(rt.maxAbsDiff).toBe(Math.max(...rt.outputs!.map((o) => o.maxAbsDiff!)));
    }
    // memlane-rt either ran it (plan v2) or its row names why not
    if (!ran.includes("native")) expect(r.runtimesNotRun?.map((x) => x.name)).toEqual(["native"]);
    expect(r.inputs!.map((i) => [i.name, i.dtype, i.shape])).toEqual([
      ["input_ids", "int64", [-1, 10]], ["attention_mask", "int64", [-1, 10]], ["features", "float32", [-1, 8]],
    ]);
    expect(r.inputs![0]!.values).toMatch(/^ids in \[0, 1000\) \(indices of Gather "[^"]+"\)$/);
    expect(r.inputs![1]!.values).toBe("ones (mask)");
    expect(res.stdout).toMatch(/Max abs diff per output vs python-ort:\n.*\n.*\nlogits +reference +\S+/);
    expect(res.stdout).toMatch(/\nhidden +reference +\S+/);
  });

  it("LayoutLM-like bbox: generated boxes in range, so every runtime runs the width and height embeddings and agrees", { timeout: 120_000 }, async () => {
    const runs = path.join(out, "layout-boxes");
    const res = await cli(["compare", path.join(dir, "layout-boxes.onnx"), "--runtimes", "python-ort,native", "--batch", "1,4", "--seq", "10", "--iterations", "3", "-q", "-o", runs]);
    expect(res.code, res.all).toBe(0);
    const { r } = report(runs);
    expect(r.inputs!.map((i) => [i.name, i.values.replace(/ \(indices.*/, "")])).toEqual([
      ["input_ids", "ids in [0, 100)"], ["bbox", "boxes (x0, y0, x1, y1) in [0, 64), x0 <= x1, y0 <= y1"], ["attention_mask", "ones (mask)"],
    ]);
    expect(r.runtimes.map((x) => x.name)).toEqual(["python-ort", "native"]);
    expect(r.runtimes[1]!.maxAbsDiff!).toBeLessThan(1e-3);
  });

  it("--inputs FILE.npz feeds the file's rows: python-ort's logits are torch's", { timeout: 120_000 }, async () => {
    const runs = path.join(out, "npz");
    const res = await cli(["compare", path.join(dir, "ids-mask-features.onnx"), "--runtimes", "python-ort,node-ort", "--inputs", path.join(dir, "inputs.npz"),
      "--batch", "1,2", "--iterations", "3", "-q", "-o", runs]);
    expect(res.code, res.all).toBe(0);
    const { r, runDir } = report(runs);
    expect(r.inputs!.map((i) => [i.name, i.shape, i.values])).toEqual([
      ["input_ids", [-1, 12], `from ${path.join(dir, "inputs.npz")}`],
      ["attention_mask", [-1, 12], `from ${path.join(dir, "inputs.npz")}`],
      ["features", [-1, 8], `from ${path.join(dir, "inputs.npz")}`],
    ]);
    expect(r.runtimes[1]!.outputs!.map((o) => o.shape)).toEqual([[5, 4], [5, 12, 16]]);
    const got = f32(path.join(runDir, "outputs-python-ort.f32"));
    const want = f32(path.join(dir, "expected-logits.f32"));
    expect(got.length).toBe(20);
    for (let i = 0; i < want.length; i++) expect(Math.abs(got[i]! - want[i]!), `logit ${i}`).toBeLessThan(1e-4);
  });

  it("bad --shape and --inputs are usage errors (exit 2) naming the flag and the input", { timeout: 120_000 }, async () => {
    const model = path.join(dir, "ids-mask-features.onnx");
    const cases: Array<[string[], RegExp]> = [
      [["--shape", "nope=1x9"], /--shape: the model has no input "nope" \(its inputs: input_ids, attention_mask, features\)/],
      [["--shape", "input_ids=1x9x3"], /--shape: input "input_ids" has rank 2 \[batch, seq\], received 3 dims/],
      [["--shape", "features=1x9"], /--shape: input "features" dim 1 is fixed at 8 by the model/],
      [["--shape", "input_ids=1x9,attention_mask=1x10"], /--shape: dim "seq" of input "attention_mask" is 10, but input "input_ids" makes it 9/],
      [["--shape", "input_ids=1by9"], /--shape: expected name=DIMxDIM.*received "input_ids=1by9"/],
      [["--inputs", path.join(dir, "inputs-float64.npz")], /--inputs: array "features" in .* is numpy <f8, input "features" takes float32/],
      [["--inputs", path.join(dir, "inputs-missing.npz")], /--inputs: .* has no array "attention_mask" for input "attention_mask"/],
    ];
    for (const [flags, re] of cases) {
      const res = await cli(["compare", model, ...flags, "-o", path.join(out, "never")]);
      expect(res.code, `${flags.join(" ")}\n${res.all}`).toBe(2);
      expect(res.stderr, flags.join(" ")).toMatch(re);
    }
    expect(existsSync(path.join(out, "never")), "no run started").toBe(false);
  });
});

describe("memlane compare, runtimes independent", () => {
  it("a runtime that fails gets its row with the error, the others run: exit 0", { timeout: 120_000 }, async () => {
    const runs = path.join(out, "one-fails");
    // A memlane-rt that exits at once (a broken install): the native worker dies before its hello.
    const res = await cli(["compare", path.join(ensureModels().dir, "mlp.onnx"), "--batch", "1,4", "--iterations", "3", "-q", "-o", runs], { MEMLANE_RT: "/bin/false" });
    expect(res.code, res.all).toBe(0);
    const { r } = report(runs);
    expect(r.runtimes.map((x) => x.name)).toEqual(["python-ort", "node-ort"]);
    expect(r.runtimesNotRun).toEqual([expect.objectContaining({ name: "native", status: "failed" })]);
    expect(r.runtimesNotRun![0]!.error.message).toMatch(/memlane-rt|\/bin\/false|exit/);
    expect(r.stages.find((s) => s.name === "bench:native")!.status).toBe("failed");
    expect(res.stdout).toMatch(/\nnative +failed +- /);
    expect(res.stdout).toMatch(/\nnative: failed — [A-Z_]+: /);
  });

  it("no runtime runs: every row says why, exit 1", { timeout: 120_000 }, async () => {
    const runs = path.join(out, "none-runs");
    // ids 1999 through a 1000-row embedding: ONNX Runtime refuses the Gather, in Python and in Node.
    const res = await cli(["compare", path.join(dir, "ids-mask-features.onnx"), "--runtimes", "python-ort,node-ort", "--inputs", path.join(dir, "inputs-out-of-range.npz"),
      "--batch", "1", "--iterations", "2", "-q", "-o", runs]);
    expect(res.code, res.all).toBe(1);
    expect(res.stdout).toMatch(/No runtime completed\./);
    expect(res.stdout).toMatch(/python-ort: failed — [A-Z_]+: .*1999/);
    expect(res.stdout).toMatch(/node-ort: failed — [A-Z_]+: .*1999/);
    expect(res.stderr).toMatch(/memlane compare: no runtime ran/);
    const { r } = report(runs);
    expect(r.runtimes).toEqual([]);
    expect(r.runtimesNotRun!.map((x) => [x.name, x.status])).toEqual([["python-ort", "failed"], ["node-ort", "failed"]]);
  });
});

describe("memlane compile", () => {
  it("names every unsupported op at once: op, count, first node", { timeout: 60_000 }, async () => {
    const res = await cli(["compile", path.join(dir, "unsupported-ops.onnx"), "-o", path.join(out, "unsupported.mlplan")]);
    expect(res.code, res.all).toBe(1);
    expect(res.stderr).toMatch(/unsupported-ops\.onnx: 3 ops memlane-rt cannot run — not supported: Hardmax \(2 nodes, first "hardmax_a"\), LpNormalization \(node "lp_norm"\), Shrink \(node "shrink"\); memlane-rt supports: /);
    expect(existsSync(path.join(out, "unsupported.mlplan"))).toBe(false);
  });
});
