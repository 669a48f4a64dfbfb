// memlane check / diff and pipeline budgets, on a report built from a realistic run record
// and written to a temp dir, through the CLI's own main() with captured output.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Io } from "../../src/cli/io.ts";
import { main } from "../../src/cli/main.ts";
import { parseSizeMiB } from "../../src/memory/size.ts";
import { budgetLimits, checkBudget } from "../../src/pipeline/budgets.ts";
import { pipeline } from "../../src/pipeline/builder.ts";
import { buildReport } from "../../src/report/build.ts";
import { diffReports } from "../../src/report/diff.ts";
import { checkLimits } from "../../src/report/limits.ts";
import type { Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";
import { realisticRun } from "./report-fixture.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-gates-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function capture(): Io & { outText: string[]; errText: string[] } {
  const outText: string[] = [];
  const errText: string[] = [];
  return { outText, errText, out: (l) => outText.push(l), err: (l) => errText.push(l), isTTY: false, redraw: () => {}, columns: 120 };
}

function writeRun(name: string, report: Report): string {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, "report.json"), JSON.stringify(report));
  return d;
}

const base = buildReport(realisticRun());
const rt = (r: Report, name: string) => r.runtimes.find((x) => x.name === name)!;
// native's worst end RSS over its phases, computed here, not copied from the fixture.
const nativeWorstRss = Math.max(...rt(base, "native").phases.map((p) => p.rssMiB));

describe("sizes", () => {
  it("parses binary and decimal units, a bare number is MiB", () => {
    expect(parseSizeMiB("80MiB")).toBe(80);
    expect(parseSizeMiB("2GiB")).toBe(2048);
    expect(parseSizeMiB("512K")).toBe(0.5);
    expect(parseSizeMiB("1GB")).toBeCloseTo(953.674, 3);
    expect(parseSizeMiB("10")).toBe(10);
    expect(() => parseSizeMiB("10 parsecs")).toThrow(/"10 parsecs" is not a memory size/);
    expect(() => parseSizeMiB("")).toThrow(/not a memory size/);
  });
});

describe("checkLimits", () => {
  it("passes a limit above the worst phase and names runtime, phase, figure and limit when below", () => {
    const [ok] = checkLimits(base, [{ runtime: "native", figure: "rss", limitMiB: nativeWorstRss + 1, source: "t" }]);
    expect(ok!.status).toBe("ok");
    const [bad] = checkLimits(base, [{ runtime: "native", figure: "rss", limitMiB: nativeWorstRss - 0.5, source: "--max-rss native" }]);
    expect(bad!.status).toBe("exceeded");
    expect(bad!.worstMiB).toBe(nativeWorstRss);
    expect(bad!.phase).toBe(rt(base, "native").phases.find((p) => p.rssMiB === nativeWorstRss)!.name);
    expect(bad!.message).toMatch(/^native: RSS at phase end .* in phase \S+ > limit .*--max-rss native/);
  });

  it("checks every runtime with *, the training stage by name, and refuses to pass an unknown runtime", () => {
    const all = checkLimits(base, [{ runtime: "*", figure: "peak", limitMiB: 1, source: "t" }]);
    expect(all.map((c) => c.runtime)).toEqual(base.runtimes.map((r) => r.name));
    expect(all.every((c) => c.status === "exceeded")).toBe(true);
    const [train] = checkLimits(base, [{ runtime: "training", figure: "peak", limitMiB: 1e6, source: "t" }]);
    expect(train).toMatchObject({ runtime: "training", status: "ok" });
    const [typo] = checkLimits(base, [{ runtime: "natve", figure: "rss", limitMiB: 1e6, source: "t" }]);
    expect(typo!.status).toBe("unmeasured");
    expect(typo!.message).toMatch(/natve: not in this report \(it has python-torch, python-ort, node-ort, native, training\)/);
  });

  it("says a GPU limit was not measured on a report without GPU figures", () => {
    const [gpu] = checkLimits(base, [{ runtime: "native", figure: "gpu", limitMiB: 100, source: "t" }]);
    expect(gpu!.status).toBe("unmeasured");
  });
});

describe("memlane check", () => {
  const runDir = writeRun("a", base);

  it("exits 0 when every limit holds and 1 naming the exceeded one", async () => {
    let io = capture();
    expect(await main(["check", runDir, "--max-rss", `native=${Math.ceil(nativeWorstRss) + 1}MiB,python-ort=10GiB`], io)).toBe(0);
    expect(io.outText.join("\n")).toMatch(/2 of 2 limit\(s\) hold/);
    io = capture();
    expect(await main(["check", join(runDir, "report.json"), "--max-rss", "native=1MiB", "--max-peak", "*=100GiB"], io)).toBe(1);
    expect(io.errText.join("\n")).toMatch(/EXCEEDED native: RSS at phase end .* > limit 1.00 MiB \(--max-rss native\)/);
  });

  it("fails an unmeasured GPU limit unless --allow-unmeasured", async () => {
    expect(await main(["check", runDir, "--max-gpu", "native=1GiB"], capture())).toBe(1);
    expect(await main(["check", runDir, "--max-gpu", "native=1GiB", "--allow-unmeasured"], capture())).toBe(0);
  });

  it("is a usage error without limits or with a bad size, and a failure on a missing or broken report", async () => {
    let io = capture();
    expect(await main(["check", runDir], io)).toBe(2);
    expect(io.errText.join("\n")).toMatch(/no limit given/);
    io = capture();
    expect(await main(["check", runDir, "--max-rss", "native=lots"], io)).toBe(2);
    expect(io.errText.join("\n")).toMatch(/--max-rss: native: "lots" is not a memory size/);
    io = capture();
    expect(await main(["check", join(dir, "nope"), "--max-rss", "native=1"], io)).toBe(1);
    expect(io.errText.join("\n")).toMatch(/no such run directory/);
    const broken = join(dir, "broken");
    mkdirSync(broken);
    writeFileSync(join(broken, "report.json"), "{\"schemaVersion\": 1");
    io = capture();
    expect(await main(["check", broken, "--max-rss", "native=1"], io)).toBe(1);
    expect(io.errText.join("\n")).toMatch(/not valid JSON/);
  });
});

describe("memlane diff", () => {
  it("prints per-runtime, per-phase deltas B - A", async () => {
    const b = structuredClone(base);
    const nat = rt(b, "native");
    const steady = nat.phases.find((p) => p.name === "steady-inference")!;
    steady.rssMiB += 3;
    nat.steady.rssMiB += 3;
    const d = diffReports(base, b).find((r) => r.runtime === "native")!;
    expect(d.phases.find((p) => p.phase === "steady-inference")!.rssMiB.delta).toBeCloseTo(3, 9);
    expect(d.phases.find((p) => p.phase === "model-load")!.rssMiB.delta).toBe(0);
    expect(d.steady.rssMiB.delta).toBeCloseTo(3, 9);
    const io = capture();
    expect(await main(["diff", writeRun("da", base), writeRun("db", b)], io)).toBe(0);
    const text = io.outText.join("\n");
    expect(text).toMatch(/native:/);
    expect(text).toMatch(/steady-inference\s+\+3\.00 \(\+\d/);
  });

  it("lists a runtime present on one side only", () => {
    const b = structuredClone(base);
    b.runtimes = b.runtimes.filter((r) => r.name !== "node-ort");
    expect(diffReports(base, b).find((r) => r.runtime === "node-ort")!.presence).toBe("a only");
  });
});

describe("pipeline budgets", () => {
  it("are checked at build time, naming stage and key", () => {
    expect(() => checkBudget("bench:native", { rssMib: 10 })).toThrow(/stage "bench:native": budget.rssMib/);
    expect(() => checkBudget("bench:native", { rssMiB: -1 })).toThrow(/a positive number of MiB/);
    expect(() => pipeline("p").export({ onnx: "/x.onnx" }).benchmark("native", { budget: { rssMiB: 0 } })).toThrow(/budget.rssMiB/);
  });

  it("become limits on the rows the report names, and land in a valid report", () => {
    const p = pipeline("p").train({ arch: "digits-cnn", budget: { peakRssMiB: 600 } }).export().benchmark("native", { budget: { rssMiB: 1, ussMiB: 1e6 } });
    const limits = budgetLimits(p.stages);
    expect(limits.map((l) => [l.runtime, l.figure, l.limitMiB])).toEqual([["training", "peak", 600], ["native", "rss", 1], ["native", "uss", 1e6]]);
    const r = structuredClone(base);
    r.budgets = checkLimits(r, limits);
    expect(r.budgets.map((c) => c.status)).toEqual([r.training!.phases.some((x) => x.peakRssMiB > 600) ? "exceeded" : "ok", "exceeded", "ok"]);
    expect(validateReport(JSON.parse(JSON.stringify(r)))).toEqual([]);
  });
});
