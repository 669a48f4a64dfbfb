import { mkdtempSync, readdirSync, readFileSync, rmSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { expectNoneLeft, ROOT, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-cli-run-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

function positive(label: string, v: unknown): void {
  expect(typeof v, label).toBe("number");
  expect(v as number, label).toBeGreaterThan(0);
}

describe("memlane run (end to end, real workers)", () => {
  let runDir = "";

  it("runs a small pipeline and writes report.json with every figure measured", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/small.ts", "--out", out]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
    const dirs = readdirSync(out);
    expect(dirs).toHaveLength(1);
    expect(dirs[0]).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/);
    runDir = path.join(out, dirs[0]!);
    const r = JSON.parse(readFileSync(path.join(runDir, "report.json"), "utf8")) as Report;

    expect(r.pipeline).toBe("small");
    expect(r.training).not.toBeNull();
    positive("training.accuracy", r.training!.accuracy);
    expect(r.training!.phases.map((p) => p.name)).toEqual(["import", "data-load", "epoch-1", "epoch-2", "checkpoint-save"]);

    const nativeBuilt = existsSync(path.join(ROOT, "native/build/runtime/memlane-rt")) || existsSync(path.join(ROOT, "native/build/memlane-rt"));
    expect(r.runtimes.map((x) => x.name).sort()).toEqual([...(nativeBuilt ? ["native"] : []), "node-ort", "python-ort", "python-torch"]);
    const pids = new Set<number>();
    for (const rt of r.runtimes) {
      positive(`${rt.name} pid`, rt.pid);
      pids.add(rt.pid);
      // memlane-rt may add GPU phases (cuda-context...); the five are everyone's
      const names = rt.phases.map((p) => p.name).filter((n) => rt.name !== "native" || !["cuda-context", "weights-upload", "arena"].includes(n));
      expect(names).toEqual(["import", "runtime-create", "model-load", "first-inference", "steady-inference"]);
      for (const p of rt.phases) {
        positive(`${rt.name} ${p.name} rssMiB`, p.rssMiB);
        positive(`${rt.name} ${p.name} ussMiB`, p.ussMiB);
        positive(`${rt.name} ${p.name} peakRssMiB`, p.peakRssMiB);
        expect(p.deltaRssMiB, `${rt.name} ${p.name} deltaRssMiB`).not.toBeNull();
        expect(p.endMs).toBeGreaterThanOrEqual(p.startMs);
      }
      positive(`${rt.name} steady.rssMiB`, rt.steady.rssMiB);
      positive(`${rt.name} steady.ussMiB`, rt.steady.ussMiB);
      positive(`${rt.name} steady.pssMiB`, rt.steady.pssMiB);
      for (const b of ["batch1", "batch8"] as const) {
        positive(`${rt.name} ${b} p50`, rt.latencyMs[b]!.p50);
        positive(`${rt.name} ${b} p99`, rt.latencyMs[b]!.p99);
      }
      positive(`${rt.name} throughput`, rt.throughputPerS);
      positive(`${rt.name} accuracy`, rt.accuracy);
      // every runtime computes the same function: its accuracy equals the reference's
      expect(rt.accuracy).toBe(r.runtimes.find((x) => x.name === "python-torch")!.accuracy);
      if (rt.name === "python-torch") expect(rt.maxAbsDiff).toBeNull();
      else expect(rt.maxAbsDiff!).toBeLessThan(1e-3);
    }
    // Pipelined samples/s and backend notes are written for every runtime (null, never absent):
    // pipelined timing happens on CUDA only (memlane-rt, python-torch), notes come from memlane-rt.
    for (const rt of r.runtimes) {
      expect(rt, rt.name).toHaveProperty("pipelinedThroughputPerS");
      expect(rt, rt.name).toHaveProperty("backendNotes");
      if (rt.device === "cpu" || !["native", "python-torch"].includes(rt.name)) expect(rt.pipelinedThroughputPerS, rt.name).toBeNull();
      if (rt.name !== "native") expect(rt.backendNotes, rt.name).toBeNull();
      else if (rt.backendNotes !== null) expect(rt.backendNotes.trim().length, "native backendNotes: null or non-empty").toBeGreaterThan(0);
    }
    // each runtime had its own fresh process; node-ort is the orchestrator itself
    expect(pids.size).toBe(r.runtimes.length);
    if (nativeBuilt) expect(r.runtimes.find((x) => x.name === "native")!.process.kind).toBe("memlane-rt");
    // a fresh worker per runtime: python-ort's process never imported torch (~190 MiB alone)
    const rss = (n: string): number => r.runtimes.find((x) => x.name === n)!.steady.rssMiB;
    expect(rss("python-ort")).toBeLessThan(150);
    expect(rss("python-torch")).toBeGreaterThan(rss("python-ort"));
    const nodeOrt = r.runtimes.find((x) => x.name === "node-ort")!;
    expect(nodeOrt.process.kind).toBe("node");
    expect(r.numerics.reference).toBe("python-torch");

    expect(r.checkpointLoad.map((c) => c.method)).toEqual(["safetensors", "torch.load"]);
    for (const c of r.checkpointLoad) {
      positive(`${c.method} fileMiB`, c.fileMiB);
      positive(`${c.method} peakRssMiB`, c.peakRssMiB);
      positive(`${c.method} ms`, c.ms);
    }
    expect(new Set(r.checkpointLoad.map((c) => c.pid)).size).toBe(2);

    const stages = Object.fromEntries(r.stages.map((s) => [s.name, s]));
    expect(stages["bench:native"]!.status).toMatch(/ok|skipped/);
    for (const n of ["train", "export", "bench:python-torch", "bench:python-ort", "bench:node-ort", "checkpoint-load", "stats"])
      expect(stages[n]!.status, n).toBe("ok");
    // the python stage's interpreter was memory-tracked under its pid
    const stats = JSON.parse(readFileSync(path.join(runDir, "stats.json"), "utf8")) as { n: number; pid: number };
    expect(stats.n).toBeGreaterThan(100);
    expect(stages.stats!.pid).toBe(stats.pid);
    expect(r.timeline.some((t) => t.pid === stats.pid)).toBe(true);
    for (const t of r.timeline) expect(t.periodMs).toBeLessThanOrEqual(50);

    expect(existsSync(path.join(runDir, "report.md"))).toBe(true);
    expect(cli.stdout()).toMatch(/python-torch[\s\S]*python-ort[\s\S]*node-ort/);
    expect(cli.stdout()).not.toMatch(/\x1b\[/); // not a TTY: no bars, plain lines
    expect(cli.stdout()).toMatch(/train: epoch 2\/2/);
  });

  it("memlane compare runs an exported ONNX on the ONNX runtimes, ORT as reference", async () => {
    const onnx = path.join(runDir, "digits-cnn.onnx");
    const cmpOut = path.join(out, "compare");
    const cli = startCli(["compare", onnx, "--runtimes", "python-ort,node-ort,native", "--batch", "1,4", "--iterations", "3", "--out", cmpOut]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
    const dir = readdirSync(cmpOut)[0]!;
    const r = JSON.parse(readFileSync(path.join(cmpOut, dir, "report.json"), "utf8")) as Report;
    expect(r.training).toBeNull();
    const names = r.runtimes.map((x) => x.name);
    expect(names).toEqual(expect.arrayContaining(["python-ort", "node-ort"]));
    for (const rt of r.runtimes) if (rt.name !== "python-ort") expect(rt.maxAbsDiff!, rt.name).toBeLessThan(1e-4);
    expect(r.numerics.reference).toBe("python-ort");
    const node = r.runtimes.find((x) => x.name === "node-ort")!;
    expect(node.maxAbsDiff!).toBeLessThan(1e-4);
    expect(node.accuracy).toBeNull(); // generated inputs: no labels
    if (!names.includes("native")) expect(cli.stdout()).toMatch(/native: unavailable — /);
  });

  it("memlane compile prints the arena against the lower bound", async () => {
    const plan = path.join(out, "digits.mlplan");
    const cli = startCli(["compile", path.join(runDir, "digits-cnn.onnx"), "-o", plan]);
    const { code } = await cli.exit;
    expect(code, cli.stderr()).toBe(0);
    expect(cli.stdout()).toMatch(/arena: .*\/sample vs lower bound .*\/sample/);
    expect(existsSync(plan)).toBe(true);
  });
});
