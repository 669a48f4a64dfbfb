// The zoo suite (npm run test:zoo; part of npm test): real architectures with random weights
// (torchvision, transformers, torch.nn; python -m memlane_worker.realzoo), each exported with
// both torch exporters once per run into a temp dir, then `memlane compare` through the real
// CLI on python-ort, node-ort and native. Every runtime row must run and native must match
// ONNX Runtime within 1e-4 of each output's scale. The table at the end says per model what
// ran and what failed. MEMLANE_ZOO=name,name limits the models; MEMLANE_ZOO_EXPORTER the exporter.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spec as compareSpec } from "../../src/cli/commands/compare.ts";
import { expectNoneLeft, ROOT, startCli } from "../integration/pipeline-helpers.ts";
import { NATIVE_GAPS } from "./native-gaps.ts";
import { evaluate, formatTable, RUNTIMES, type ZooExport, type ZooReport, type ZooRow } from "./rows.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-zoo-"));
const rows: ZooRow[] = [];
const started = Date.now();
afterAll(() => {
  rmSync(out, { recursive: true, force: true });
  if (rows.length) console.log(`\nzoo table (${((Date.now() - started) / 1000).toFixed(0)} s):\n${formatTable(rows)}`);
});

const python = path.join(ROOT, ".venv/bin/python");
const only = process.env.MEMLANE_ZOO?.split(",").filter(Boolean) ?? [];
const exporter = process.env.MEMLANE_ZOO_EXPORTER ?? "both";

/** The model names, without importing torch (the list command imports the specs only). */
function modelNames(): string[] {
  const r = spawnSync(python, ["-m", "memlane_worker.realzoo", "list"], { cwd: ROOT, env: pyEnv(), encoding: "utf8" });
  if (r.status !== 0) throw new Error(`realzoo list failed: ${r.stderr}`);
  const all = r.stdout.trim().split("\n");
  const unknown = only.filter((n) => !all.includes(n));
  if (unknown.length) throw new Error(`MEMLANE_ZOO names unknown models: ${unknown.join(", ")} (known: ${all.join(", ")})`);
  return only.length ? only : all;
}

function pyEnv(): NodeJS.ProcessEnv {
  return { ...process.env, PYTHONPATH: path.join(ROOT, "python"), HF_HUB_OFFLINE: "1" };
}

const names = modelNames();
const exporters = exporter === "both" ? ["legacy", "dynamo"] : [exporter];
let manifest = new Map<string, ZooExport>();

beforeAll(async () => {
  // Every export in one Python process (torch and transformers imported once): the cache of
  // this run. --keep-going: a failed export is that model's failure, not the suite's. Async:
  // a blocked event loop would time out vitest's own worker RPC.
  const dir = path.join(out, "models");
  const child = spawn(python, ["-m", "memlane_worker.realzoo", "export", ...names, "--dir", dir, "--exporter", exporter, "--keep-going"], {
    cwd: ROOT,
    env: pyEnv(),
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => void (stderr = (stderr + d.toString()).slice(-8000)));
  const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  if (!existsSync(path.join(dir, "manifest.json"))) throw new Error(`realzoo export wrote no manifest (exit ${code}):\n${stderr}`);
  const list = JSON.parse(readFileSync(path.join(dir, "manifest.json"), "utf8")) as ZooExport[];
  manifest = new Map(list.map((e) => [`${e.name}.${e.exporter}`, e]));
});

/** `memlane compare` on one export; the report, or why there is none. */
async function compare(exp: ZooExport): Promise<{ report: ZooReport | null; error: string | null }> {
  const dir = path.join(out, `${exp.name}.${exp.exporter}`);
  // --seq exists once compare feeds every input (issue 9): sequence models get their length.
  const seq = exp.seq && "seq" in compareSpec.flags ? ["--seq", String(exp.seq)] : [];
  const cli = startCli(["compare", exp.onnx!, "--runtimes", RUNTIMES.join(","), "--batch", "1,4", "--iterations", "5", "-q", "--out", dir, ...seq]);
  const { code, signal } = await cli.exit;
  const left = await expectNoneLeft(cli.tag);
  const runs = existsSync(dir) ? readdirSync(dir) : [];
  const reportPath = runs.length === 1 ? path.join(dir, runs[0]!, "report.json") : null;
  const report = reportPath && existsSync(reportPath) ? (JSON.parse(readFileSync(reportPath, "utf8")) as ZooReport) : null;
  let error: string | null = null;
  if (left.length) error = `processes left behind: ${left.join(", ")}`;
  else if (code !== 0) error = `exit ${code ?? signal}: ${(cli.stderr().trim().split("\n").filter(Boolean).at(-1) ?? "").slice(0, 400)}`;
  rmSync(dir, { recursive: true, force: true });
  return { report, error };
}

describe("memlane compare on the real-architecture zoo", () => {
  const cases = names.flatMap((n) => exporters.map((e) => `${n}.${e}`));
  it.each(cases)("%s: every runtime runs, native matches ONNX Runtime", async (key) => {
    const exp = manifest.get(key) ?? { name: key.split(".")[0]!, exporter: key.split(".")[1] as "legacy", error: "not in the manifest", exportSeconds: 0 };
    const t0 = Date.now();
    const { report, error } = exp.error ? { report: null, error: null } : await compare(exp);
    const row = evaluate(exp, report, error, (Date.now() - t0) / 1000);
    if (error && report) row.failures.push(`compare: ${error}`);
    rows.push(row);
    const gap = NATIVE_GAPS[key];
    if (!gap) {
      expect(row.failures, `${key}:\n  ${row.failures.join("\n  ")}`).toEqual([]);
      return;
    }
    // A known native gap: only the native row may fail, and only for its listed reason.
    expect(row.failures.length, `${key} runs natively now: remove it from test/zoo/native-gaps.ts`).toBeGreaterThan(0);
    expect(row.failures, `${key}: ${row.failures.join("; ")}`).toEqual([expect.stringMatching(/^native did not run: /)]);
    expect(row.failures[0]).toMatch(gap);
    row.failures[0] = `known gap: ${row.failures[0]}`;
  });
});

describe("pipelines/tiny-gpt.ts, fast variant (int64 windows, four runtimes)", () => {
  it("trains, exports and runs on every runtime with the same next-byte accuracy", async () => {
    const { runPipeline } = await import("../../src/pipeline/run.ts");
    const { FAST, tinyGpt } = await import("../../pipelines/tiny-gpt.ts");
    const t0 = Date.now();
    const dir = path.join(out, "tiny-gpt");
    const failures: string[] = [];
    let report: ZooReport | null = null;
    try {
      report = (await runPipeline(tinyGpt(FAST), { outDir: dir, quiet: true })).report as ZooReport;
    } catch (err) {
      failures.push(`pipeline: ${(err as Error).message.split("\n")[0]}`);
    }
    const want = ["python-torch", ...RUNTIMES];
    const ran = report?.runtimes.map((r) => r.name) ?? [];
    for (const name of want) if (!ran.includes(name)) failures.push(`${name} did not run`);
    for (const s of report?.stages ?? []) if (s.status !== "ok") failures.push(`${s.name}: ${s.status} ${s.error?.message.split("\n")[0] ?? ""}`);
    const acc = report?.runtimes.map((r) => r.accuracy) ?? [];
    const n = report?.training ? 512 : 1;
    if (acc.some((a) => a === null)) failures.push(`accuracy missing: ${JSON.stringify(acc)}`);
    else if (acc.length && Math.max(...(acc as number[])) - Math.min(...(acc as number[])) > 1 / n + 1e-9)
      failures.push(`accuracies differ by more than one window: ${JSON.stringify(acc)}`);
    const native = report?.runtimes.find((r) => r.name === "native");
    rows.push({
      model: "tiny-gpt pipeline",
      exporter: "dynamo",
      ran,
      nativeDiff: native?.maxAbsDiff ?? null,
      ussRatio: null,
      failures,
      seconds: (Date.now() - t0) / 1000,
    });
    rmSync(dir, { recursive: true, force: true });
    expect(failures, failures.join("\n")).toEqual([]);
  });
});
