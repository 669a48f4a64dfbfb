// `memlane compare` on ONNX files exported from models that are not in the zoo (grouped and
// dilated convs, average pooling with concat, an MLP with tanh and sigmoid: make_models.py),
// through the real CLI, on python-ort, node-ort and memlane-rt; and on a model with an op
// memlane-rt lacks (RNN), where the ORT rows must still come back.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { memlaneRtBinary } from "../../src/workers/specs.ts";
import { ensureModels } from "../fixtures/onnx/models.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-compare-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const RUNTIMES = ["python-ort", "node-ort", "native"];
let models = "";

beforeAll(() => {
  // bootstrap always builds memlane-rt: a missing binary is a broken set-up, not a skip.
  try {
    memlaneRtBinary();
  } catch (err) {
    throw new Error(`memlane-rt is missing, so native cannot be compared; run \`npm run bootstrap\` first (${(err as Error).message})`);
  }
  models = ensureModels().dir;
}, 300_000);

/** Runs `memlane compare` on a fixture model; returns the report and the CLI's output. */
async function compare(name: string): Promise<{ r: Report; stdout: string }> {
  const dir = path.join(out, name);
  const cli = startCli(["compare", path.join(models, `${name}.onnx`), "--runtimes", RUNTIMES.join(","), "--batch", "1,8", "--iterations", "5", "--out", dir]);
  const { code } = await cli.exit;
  expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
  expect(await expectNoneLeft(cli.tag), "processes left behind").toEqual([]);
  const runs = readdirSync(dir);
  expect(runs).toHaveLength(1);
  return { r: JSON.parse(readFileSync(path.join(dir, runs[0]!, "report.json"), "utf8")) as Report, stdout: cli.stdout() };
}

describe("memlane compare on models outside the zoo", () => {
  // grouped + dilated + depthwise convs; padded average pooling (both count_include_pad) with
  // concat and ceil_mode; Linear-Tanh-Linear-Sigmoid-Linear
  it.each(["grouped-dilated", "pool-concat", "mlp"])("%s: every runtime, the same outputs, every phase measured", { timeout: 120_000 }, async (name) => {
    const { r, stdout } = await compare(name);
    expect(r.training).toBeNull();
    expect(r.runtimes.map((x) => x.name)).toEqual(RUNTIMES);
    expect(r.numerics.reference).toBe("python-ort");
    for (const rt of r.runtimes) {
      if (rt.name === "python-ort") expect(rt.maxAbsDiff).toBeNull();
      else expect(rt.maxAbsDiff!, `${name} ${rt.name} max abs diff vs python-ort`).toBeLessThan(1e-4);
      expect(rt.accuracy).toBeNull(); // generated inputs: no labels
      const phases = rt.phases.map((p) => p.name);
      expect(phases).toEqual(expect.arrayContaining(["import", "runtime-create", "model-load", "first-inference", "steady-inference"]));
      for (const p of rt.phases) {
        const what = `${name} ${rt.name} ${p.name}`;
        expect(p.rssMiB, `${what} rssMiB`).toBeGreaterThan(0);
        expect(p.ussMiB, `${what} ussMiB`).toBeGreaterThan(0);
        expect(p.peakRssMiB, `${what} peakRssMiB`).toBeGreaterThanOrEqual(p.rssMiB);
        expect(Number.isFinite(p.deltaRssMiB), `${what} deltaRssMiB`).toBe(true);
        expect(p.ms, `${what} ms`).toBeGreaterThanOrEqual(0);
      }
      expect(rt.steady.rssMiB, `${name} ${rt.name} steady`).toBeGreaterThan(0);
      for (const b of ["batch1", "batch8"] as const) expect(rt.latencyMs[b]!.p50, `${name} ${rt.name} ${b}`).toBeGreaterThan(0);
      expect(rt.throughputPerS).toBeGreaterThan(0);
    }
    expect(r.runtimes.find((x) => x.name === "native")!.process.kind).toBe("memlane-rt");
    // the comparison section: native over python-ort, on memory, latency and throughput
    const ratios = r.comparison.ratios.filter((x) => x.numerator === "native" && x.denominator === "python-ort");
    expect(ratios.map((x) => x.counter)).toEqual(expect.arrayContaining(["steady.rssMiB", "steady.ussMiB", "latencyMs.batch1.p50", "throughputPerS"]));
    for (const x of ratios) expect(x.value, `${name} ${x.counter}`).toBeGreaterThan(0);
    expect(r.comparison.steady.map((x) => x.runtime)).toEqual(RUNTIMES);
    expect(stdout).toMatch(/native \/ python-ort/);
    expect(r.stages.every((s) => s.status === "ok"), JSON.stringify(r.stages)).toBe(true);
  });

  it("an op memlane-rt lacks (RNN): python-ort and node-ort still reported, native unavailable naming the op", { timeout: 120_000 }, async () => {
    const { r, stdout } = await compare("rnn");
    expect(r.runtimes.map((x) => x.name)).toEqual(["python-ort", "node-ort"]);
    expect(r.runtimes.find((x) => x.name === "node-ort")!.maxAbsDiff!).toBeLessThan(1e-4);
    for (const rt of r.runtimes) for (const p of rt.phases) expect(p.rssMiB, `${rt.name} ${p.name}`).toBeGreaterThan(0);
    const native = r.stages.find((s) => s.name === "bench:native")!;
    expect(native.status).toBe("skipped");
    expect(native.error!.name).toBe("UNSUPPORTED_OP");
    expect(native.error!.message).toMatch(/op RNN \(node "[^"]+"\) is not supported/);
    expect(stdout).toMatch(/native: unavailable — rnn\.onnx: op RNN .*is not supported/);
    expect(r.runtimesNotRun).toEqual([expect.objectContaining({ name: "native", status: "unavailable" })]);
  });
});
