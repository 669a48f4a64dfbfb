// The per-mapping breakdown in the report: built from phase marks that carry smaps summaries
// (the realistic fixture run plus summaries shaped like real python-torch, python-ort and
// native readings), then rendered to report.json, markdown, the terminal and the HTML charts.
import { describe, expect, it } from "vitest";
import { buildReport, type RunRecord } from "../../src/report/build.ts";
import { growthLine, steadyBreakdown } from "../../src/report/breakdown.ts";
import { buildCharts } from "../../src/report/html/charts.ts";
import { kindColour } from "../../src/report/html/kinds.ts";
import { renderHtmlReport } from "../../src/report/html/index.ts";
import { renderMarkdown } from "../../src/report/markdown.ts";
import { renderTerminal } from "../../src/report/terminal.ts";
import { validateReport } from "../../src/report/validate.ts";
import { breakdownRun as run, HOST } from "./report-fixture.ts";

describe("breakdown in report.json", () => {
  const report = buildReport({ ...run(), host: HOST });

  it("is valid, and present on every phase of the runtimes that sent summaries, absent (null) on node-ort's", () => {
    expect(validateReport(JSON.parse(JSON.stringify(report)))).toEqual([]);
    for (const n of ["python-torch", "python-ort", "native"])
      for (const p of report.runtimes.find((r) => r.name === n)!.phases) expect(p.breakdown, `${n} ${p.name}`).not.toBeNull();
    for (const p of report.runtimes.find((r) => r.name === "node-ort")!.phases) expect(p.breakdown).toBeNull();
  });

  it("grows per kind over each phase, measured from the previous reading", () => {
    const torch = report.runtimes.find((r) => r.name === "python-torch")!;
    const imp = torch.phases.find((p) => p.name === "import")!.breakdown!;
    expect(imp.growthFrom).toBe("start");
    const k = Object.fromEntries(imp.kinds.map((x) => [x.kind, x]));
    expect(k["lib:torch"]!.deltaRssMiB).toBe(161);
    expect(k["lib:torch"]!.files.map((f) => f.path.split("/").pop())).toEqual(["libtorch_cpu.so", "libtorch_python.so"]);
    expect(k["heap"]!.deltaRssMiB).toBe(22);
    expect(k["anonymous"]!.deltaRssMiB).toBe(18);
    const steady = torch.phases.find((p) => p.name === "steady-inference")!.breakdown!;
    expect(steady.growthFrom).toBe("earlier-mark");
    expect(steady.kinds.find((x) => x.kind === "stacks")!.deltaRssMiB).toBe(1);
    expect(growthLine(torch.phases[0]!)).toMatch(/^import \+297\.00 MiB: torch libs \+161\.00 \(USS \+161\.00\), heap \+22\.00, anonymous \+18\.00$/);
  });

  it("puts the plan file under model & plan files for native, and onnxruntime's libs for python-ort", () => {
    const native = steadyBreakdown(report.runtimes.find((r) => r.name === "native")!)!;
    const plan = native.kinds.find((k) => k.kind === "model-files")!;
    expect(plan.files[0]!.path).toMatch(/\.mlplan$/);
    expect(plan.rssMiB).toBe(0.75);
    const ort = steadyBreakdown(report.runtimes.find((r) => r.name === "python-ort")!)!;
    expect(ort.kinds.map((k) => k.kind)).toEqual(expect.arrayContaining(["lib:onnxruntime", "lib:numpy", "lib:python", "model-files"]));
    expect(ort.totalRssMiB).toBeCloseTo(4 + 2 + 6 + 1 + 25 + 5 + 0.5, 2);
  });
});

describe("a malformed summary from a worker", () => {
  it("leaves that phase without a breakdown and says why, naming the mark; the report still builds and validates", () => {
    const rec = run();
    const native = rec.runtimes.find((r) => r.name === "native")!;
    const end = native.marks.find((m) => m.name === "model-load" && m.mark === "end")!;
    end.smaps = { "/x/plan.mlplan": [1, 2, "three"] };
    const report = buildReport({ ...rec, host: HOST });
    const p = report.runtimes.find((r) => r.name === "native")!.phases.find((x) => x.name === "model-load")!;
    expect(p.breakdown).toBeNull();
    expect(p.breakdownProblem).toMatch(/phase model-load end mark: smaps\["\/x\/plan\.mlplan"\]: expected 6 non-negative integers/);
    expect(validateReport(JSON.parse(JSON.stringify(report)))).toEqual([]);
  });
});

describe("breakdown rendered", () => {
  const report = buildReport({ ...run(), host: HOST });

  it("markdown: growth lines per phase, the steady table with files, and the runtimes side by side", () => {
    const md = renderMarkdown(report);
    expect(md).toContain("- import +297.00 MiB: torch libs +161.00 (USS +161.00), heap +22.00, anonymous +18.00");
    expect(md).toMatch(/\| torch libs \| 161\.00 \| 161\.00 \| 161\.00 \| 0\.00 \| 0\.00 \| libtorch_cpu\.so 141\.00, libtorch_python\.so 20\.00 \|/);
    expect(md).toContain("#### Where the RAM goes at the steady state, by runtime: RSS (USS) MiB per kind of mapping");
    expect(md).toMatch(/\| kind \| python-torch \| python-ort \| native \|/);
  });

  it("terminal: the top 3 kinds per runtime at steady state, within 120 columns", () => {
    const text = renderTerminal(report);
    expect(text).toContain("Where the RAM goes at steady state");
    const line = text.split("\n").find((l) => l.startsWith("python-torch") && l.includes("torch libs"))!;
    expect(line).toMatch(/torch libs 161\.0 \(161\.0\)\s+anonymous 30\.0 \(30\.0\)\s+heap 28\.0 \(28\.0\)/);
    expect(text.split("\n").every((l) => l.length <= 120)).toBe(true);
  });

  it("html: one stacked steady bar chart, growth per runtime, one colour per kind across runtimes", () => {
    const charts = buildCharts(report).filter((c) => c.section === "kinds");
    const steady = charts.find((c) => c.id === "steady-kinds")!;
    expect(steady.stacked).toBe(true);
    expect(steady.labels).toEqual(["python-torch", "python-ort", "native"]);
    expect(charts.map((c) => c.id)).toEqual(["steady-kinds", "steady-kinds-share", "growth-kinds-python-torch", "growth-kinds-python-ort", "growth-kinds-native"]);
    const colourOf = new Map<string, string>();
    for (const c of charts)
      for (const s of c.series) {
        expect(colourOf.get(s.name) ?? s.color).toBe(s.color);
        colourOf.set(s.name, s.color!);
      }
    expect(colourOf.get("torch libs")).toBe(kindColour("lib:torch"));
    expect(new Set(colourOf.values()).size).toBe(colourOf.size); // distinct kinds, distinct colours
    const share = charts.find((c) => c.id === "steady-kinds-share")!;
    const nativeShare = share.series.reduce((a, s) => a + (s.data[2] as number), 0);
    expect(Math.abs(nativeShare - 100)).toBeLessThan(0.5);
    const html = renderHtmlReport(report);
    expect(html).toContain('<section id="kinds">');
    expect(html).toContain('id="kinds-native"');
  });
});
