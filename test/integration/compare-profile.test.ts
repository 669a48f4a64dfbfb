// `memlane compare --profile` through the real CLI on a real ONNX model (resnet-mini from
// make_models.py: convs, BatchNorm folded, residual adds, pooling, Gemm): every runtime's
// per-op profile is in report.json (valid), names the model's own nodes and op types, its ops
// sum to a sane share of the profiled call and of the measured latency, and report.md,
// report.html and the terminal show it. No profile file is left behind.
import { readdirSync, readFileSync, rmSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import type { Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";
import { memlaneRtBinary } from "../../src/workers/specs.ts";
import { ensureModels } from "../fixtures/onnx/models.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-compare-profile-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const profileLeftovers = (): string[] => readdirSync(os.tmpdir()).filter((f) => /^memlane-(node-)?ort-profile-/.test(f));

let model = "";
beforeAll(() => {
  try {
    memlaneRtBinary();
  } catch (err) {
    throw new Error(`memlane-rt is missing; run \`npm run bootstrap\` first (${(err as Error).message})`);
  }
  model = path.join(ensureModels().dir, "resnet-mini.onnx");
}, 300_000);

describe("memlane compare --profile", () => {
  it("puts each runtime's per-op time in the report, naming the model's ops", { timeout: 180_000 }, async () => {
    const before = new Set(profileLeftovers());
    const cli = startCli(["compare", model, "--runtimes", "python-ort,node-ort,native", "--batch", "8,1", "--iterations", "20", "--profile", "--out", out]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
    expect(await expectNoneLeft(cli.tag), "processes left behind").toEqual([]);
    const runDir = path.join(out, readdirSync(out)[0]!);
    const r = JSON.parse(readFileSync(path.join(runDir, "report.json"), "utf8")) as Report;
    expect(validateReport(r)).toEqual([]);

    const graph = loadOnnx(model);
    const nodeNames = new Set(graph.nodes.map((n) => n.name));
    const onnxTypes = new Set(graph.nodes.map((n) => n.opType));
    for (const name of ["native", "python-ort", "node-ort"]) {
      const rt = r.runtimes.find((x) => x.name === name)!;
      const p = rt.profile!;
      expect(p, `${name} has a profile`).toBeDefined();
      expect(p.unavailable, `${name}: ${p.unavailable}`).toBeNull();
      expect(p.source).toBe(name === "native" ? "memlane-rt" : "onnxruntime");
      expect(p.batch).toBe(8); // the first batch size
      expect(p.runs).toBe(20);
      expect(p.ops.length, `${name} ops`).toBeGreaterThan(3);
      // Real ops of this model: the plan keeps ONNX node names; ORT keeps most (its fused
      // nodes are named after the node they absorbed), and its op types are ONNX's or fusions.
      const named = p.ops.filter((o) => nodeNames.has(o.name)).length;
      if (name === "native") {
        expect(named, `native op names ${p.ops.map((o) => o.name).join(", ")}`).toBe(p.ops.length);
        for (const o of p.ops) expect(onnxTypes.has(o.opType) || o.opType === "Flatten", `native op type ${o.opType}`).toBe(true);
      } else {
        expect(named, `${name} op names ${p.ops.map((o) => o.name).join(", ")}`).toBeGreaterThan(0);
      }
      expect(p.ops.some((o) => /Conv/.test(o.opType)), `${name} op types ${p.byType.map((t) => t.opType).join(", ")}`).toBe(true);
      // Slowest first; shares add up to 100 %; op types sum to the same total.
      for (let i = 1; i < p.ops.length; i++) expect(p.ops[i]!.msPerRun).toBeLessThanOrEqual(p.ops[i - 1]!.msPerRun);
      for (const o of p.ops) expect(o.minMsPerRun!, `${name} ${o.name} min vs mean`).toBeLessThanOrEqual(o.msPerRun * 1.000001);
      expect(p.ops.reduce((a, o) => a + o.pct, 0)).toBeCloseTo(100, 3);
      expect(p.byType.reduce((a, t) => a + t.msPerRun, 0)).toBeCloseTo(p.opsMsPerRun, 6);
      // The ops are inside the call: their sum is at most the profiled call's wall time and a
      // sane share of it (the rest: input copies, session overhead), and of the same order as
      // the latency measured without profiling (a shared machine: a wide band).
      const wall = p.wallMsMean!;
      expect(p.opsMsPerRun, `${name} ops ${p.opsMsPerRun} ms vs call ${wall} ms`).toBeLessThanOrEqual(wall * 1.02);
      // (ORT's share is lower on a model this small: its session overhead around ~0.1 ms kernels.)
      expect(p.opsMsPerRun / wall, `${name} ops cover of the call`).toBeGreaterThan(name === "native" ? 0.5 : 0.1);
      const measured = rt.latencyMs.batch8!.mean;
      expect(p.opsMsPerRun / measured, `${name} ops ${p.opsMsPerRun} ms vs mean latency ${measured} ms`).toBeGreaterThan(0.1);
      expect(p.opsMsPerRun / measured, `${name} ops ${p.opsMsPerRun} ms vs mean latency ${measured} ms`).toBeLessThan(10);
    }
    const md = readFileSync(path.join(runDir, "report.md"), "utf8");
    expect(md).toMatch(/## Per-op profile/);
    expect(md).toMatch(/### native\n\nnative \(memlane-rt's executor\): batch 8, 20 profiled calls/);
    const html = readFileSync(path.join(runDir, "report.html"), "utf8");
    expect(html).toMatch(/<table id="profile-top-ops">/);
    expect(html).toMatch(/<table id="profile-op-types">/);
    expect(cli.stdout()).toMatch(/Per-op profile/);
    expect(profileLeftovers().filter((f) => !before.has(f))).toEqual([]);
  });

  it("still gives ORT's profile when native cannot run the model, and a clear native row", { timeout: 180_000 }, async () => {
    const rnnOut = mkdtempSync(path.join(os.tmpdir(), "memlane-compare-profile-rnn-"));
    try {
      const rnn = path.join(ensureModels().dir, "rnn.onnx"); // RNN: not a memlane-rt op
      const cli = startCli(["compare", rnn, "--runtimes", "python-ort,native", "--batch", "2", "--iterations", "3", "--profile", "--out", rnnOut]);
      const { code } = await cli.exit;
      expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
      const runDir = path.join(rnnOut, readdirSync(rnnOut)[0]!);
      const r = JSON.parse(readFileSync(path.join(runDir, "report.json"), "utf8")) as Report;
      expect(validateReport(r)).toEqual([]);
      const ort = r.runtimes.find((x) => x.name === "python-ort")!;
      expect(ort.profile?.unavailable).toBeNull();
      expect(ort.profile!.ops.some((o) => o.opType === "RNN")).toBe(true);
      expect(r.runtimes.find((x) => x.name === "native")).toBeUndefined();
      expect(cli.stdout()).toMatch(/native: unavailable — rnn\.onnx: op RNN \(node "[^"]+"\) is not supported/);
      expect(readFileSync(path.join(runDir, "report.md"), "utf8")).toMatch(/`native` unavailable: UNSUPPORTED_OP \(10\): rnn\.onnx: op RNN/);
    } finally {
      rmSync(rnnOut, { recursive: true, force: true });
    }
  });

  it("refuses a profile batch that is not timed", async () => {
    const { pipeline } = await import("../../src/pipeline/builder.ts");
    expect(() => pipeline("p", {}).export({ onnx: model }).benchmark("native", { batchSizes: [1, 8], profile: { batch: 4 } }))
      .toThrow(/profile\.batch: expected one of batchSizes \(1, 8\), received 4/);
    expect(() => pipeline("p", {}).export({ onnx: model }).benchmark("native", { profile: { iterations: 1e6 } }))
      .toThrow(/profile\.iterations: expected an integer <= 100000, received 1000000/);
  });
});
