import { describe, expect, it } from "vitest";
import { buildReport } from "../../src/report/build.ts";
import { renderMarkdown } from "../../src/report/markdown.ts";
import { renderTerminal } from "../../src/report/terminal.ts";
import { NATIVE_NOTES, pipelinedRun, realisticRun } from "./report-fixture.ts";

const report = buildReport(realisticRun());
const md = renderMarkdown(report);
const term = renderTerminal(report);
const lines = (text: string) => text.split("\n");
/** Cells of the first markdown row starting with `| first |` after `heading`. */
function mdRow(heading: string, first: string): string[] {
  const from = md.indexOf(heading);
  expect(from).toBeGreaterThanOrEqual(0);
  const row = lines(md.slice(from)).find((l) => l.startsWith(`| ${first} |`));
  expect(row, `row ${first} under ${heading}`).toBeDefined();
  return row!.slice(2, -2).split(" | ");
}
/** Whitespace-separated cells of the terminal row starting with `first`, within the block after `heading`. */
function termRow(heading: string, first: string): string[] {
  const from = term.indexOf(heading);
  expect(from).toBeGreaterThanOrEqual(0);
  const row = lines(term.slice(from)).find((l) => l.startsWith(`${first} `));
  expect(row, `row ${first} under ${heading}`).toBeDefined();
  return row!.split(/\s{2,}/);
}

describe("renderMarkdown", () => {
  it("gives each runtime a per-phase table naming process, phase and counter", () => {
    expect(md).toContain("### python-ort: process pid 4102 (python), device cpu");
    expect(md).toContain("| phase | RSS MiB | Δ RSS MiB | peak RSS MiB | peak from | USS MiB | Δ USS MiB | PSS MiB | swap MiB | ms | GPU MiB | Δ GPU MiB | peak GPU MiB | malloc free MiB |");
    expect(mdRow("### python-ort:", "model-load")).toEqual([
      "model-load", "65.00", "+2.00", "68.50", "hwm", "47.00", "+2.00", "51.50", "0.00", "8", "unavailable", "unavailable", "unavailable", "unavailable",
    ]);
    expect(mdRow("### python-ort:", "first-inference").slice(0, 5)).toEqual(["first-inference", "74.00", "+9.00", "80.00", "sample"]);
    expect(mdRow("### native:", "first-inference").slice(0, 7)).toEqual(["first-inference", "4.00", "+0.25", "4.00", "end", "2.50", "+0.75"]);
    expect(mdRow("### training:", "epoch-1").slice(0, 5)).toEqual(["epoch-1", "340.00", "+18.00", "352.00", "hwm"]);
  });

  it("summarises runtimes with steady memory, latency, throughput, accuracy and numerics", () => {
    expect(mdRow("## Runtimes at a glance", "native")).toEqual([
      "native", "pid 4103 (memlane-rt)", "cpu", "4.00", "2.50", "2.88", "unavailable", "0.018", "0.031", "0.520", "0.800", "123077", "97.22 %", "3.10e-6",
    ]);
    expect(mdRow("## Runtimes at a glance", "python-torch").at(-1)).toBe("reference");
    expect(mdRow("## Latency and throughput", "python-ort")).toEqual(["python-ort", "0.041", "0.090", "0.045", "0.610", "0.950", "0.660", "104918"]);
    expect(mdRow("## Accuracy and numerics", "node-ort")).toEqual(["node-ort", "97.22 %", "2.40e-6"]);
  });

  it("renders the comparison: steady side by side, per-phase increments, native/Python ratios", () => {
    expect(mdRow("#### Steady state", "steady USS MiB")).toEqual(["steady USS MiB", "271.00", "50.00", "67.00", "2.50"]);
    expect(mdRow("#### Δ RSS MiB per phase", "import")).toEqual(["import", "+297.00", "+44.00", "+22.00", "—"]);
    expect(mdRow("#### Δ USS MiB per phase", "first-inference")).toEqual(["first-inference", "+12.00", "+3.00", "+3.00", "+0.75"]);
    expect(mdRow("#### Native over Python", "native / python-ort")).toEqual(["native / python-ort", "0.053", "0.050", "0.051", "0.439", "1.173"]);
  });

  it("lists checkpoint loads, GPU status, failed stages with their error, sampling", () => {
    expect(mdRow("## Checkpoint load", "torch.load")).toEqual(["torch.load", "pid 4201", "3.12", "+3.00", "+2.90", "316.00", "+6.00", "20", "—"]);
    expect(md).toContain("Status: unavailable, no NVIDIA driver (libnvidia-ml.so.1 not found).");
    expect(mdRow("## Stages", "deploy python-trt")).toEqual([
      "deploy python-trt", "infer.trt", "python", "4104", "failed", "5", "BACKEND_UNAVAILABLE (15): tensorrt is not installed",
    ]);
    expect(mdRow("## Sampling", "python-ort")).toEqual(["python-ort", "4102", "6", "50"]);
  });
});

describe("pipelined figures and backend notes", () => {
  const piped = buildReport(pipelinedRun());
  const pmd = renderMarkdown(piped);
  const pterm = renderTerminal(piped);
  const rowOf = (text: string, heading: string, first: string) =>
    lines(text.slice(text.indexOf(heading))).find((l) => l.startsWith(`| ${first} |`) || l.startsWith(`${first} `));

  it("add no pipelined column and no notes to a CPU-only report", () => {
    expect(md).not.toMatch(/pipelined/i);
    expect(md).not.toContain("Backend notes");
    expect(term).not.toMatch(/pipelined|piped/i);
    expect(term).not.toContain("Backend notes");
  });

  it("markdown: pipelined /s beside throughput, — for runtimes that do not pipeline, pipelined ms per batch, notes listed", () => {
    const header = rowOf(pmd, "## Runtimes at a glance", "runtime")!.slice(2, -2).split(" | ");
    expect(header.slice(-4)).toEqual(["throughput /s", "pipelined /s", "accuracy", "max abs diff"]);
    expect(rowOf(pmd, "## Runtimes at a glance", "native")!.slice(2, -2).split(" | ").slice(-4)).toEqual(["123077", "300047", "97.22 %", "3.10e-6"]);
    expect(rowOf(pmd, "## Runtimes at a glance", "python-ort")!.slice(2, -2).split(" | ").slice(-4)).toEqual(["104918", "—", "97.22 %", "2.40e-6"]);
    expect(pmd).toContain(`Backend notes:\n\n- \`native\`: ${NATIVE_NOTES}`);
    expect(rowOf(pmd, "## Latency and throughput", "runtime")!.slice(2, -2).split(" | ")).toEqual([
      "runtime", "batch1 p50 ms", "batch1 p99 ms", "batch1 mean ms", "batch1 pipelined ms",
      "batch64 p50 ms", "batch64 p99 ms", "batch64 mean ms", "batch64 pipelined ms", "throughput /s (largest batch)", "pipelined /s (largest batch)",
    ]);
    expect(rowOf(pmd, "## Latency and throughput", "native")!.slice(2, -2).split(" | ")).toEqual([
      "native", "0.018", "0.031", "0.020", "0.009", "0.520", "0.800", "0.550", "0.213", "123077", "300047",
    ]);
    expect(rowOf(pmd, "## Latency and throughput", "python-torch")!.slice(2, -2).split(" | ")).toEqual([
      "python-torch", "0.212", "0.350", "0.220", "—", "1.900", "2.600", "2.000", "—", "33684", "—",
    ]);
  });

  it("terminal: a piped/s column (still one table in 120 columns) and the notes, wrapped within the width", () => {
    const h = "Per runtime, steady state";
    const header = rowOf(pterm, h, "runtime")!.split(/\s{2,}/);
    expect(header.slice(-4)).toEqual(["samples/s", "piped/s", "accuracy", "max abs diff"]);
    expect(rowOf(pterm, h, "native")!.split(/\s{2,}/).slice(-4)).toEqual(["123077", "300047", "97.22 %", "3.10e-6"]);
    expect(rowOf(pterm, h, "node-ort")!.split(/\s{2,}/).slice(-4)).toEqual(["91428", "-", "97.22 %", "2.40e-6"]);
    expect(pterm).toContain("piped/s: samples/s, requests sent back to back, then drained; - not timed so\n");
    expect(pterm).toContain(`Backend notes:\n  native: ${NATIVE_NOTES}`);
    for (const l of lines(pterm)) expect(l.length, l).toBeLessThanOrEqual(120);
    const narrow = renderTerminal(piped, { width: 80 });
    for (const l of lines(narrow).slice(1)) expect(l.length, l).toBeLessThanOrEqual(80);
    const notes = lines(narrow.slice(narrow.indexOf("Backend notes:"))).slice(1, 4);
    expect(notes[0]).toMatch(/^ {2}native: cudaGraph:/);
    expect(notes[1]).toMatch(/^ {4}\S/);
    expect(notes.join(" ").replace(/\s+/g, " ")).toContain("releaseHostWeights: 43000 KiB advised DONTNEED");
  });

  it("read an older report without the two fields as not measured", () => {
    const old = JSON.parse(JSON.stringify(report)) as typeof report;
    for (const r of old.runtimes as Array<Partial<(typeof old.runtimes)[number]>>) {
      delete r.pipelinedThroughputPerS;
      delete r.backendNotes;
    }
    expect(renderMarkdown(old)).toBe(md);
    expect(renderTerminal(old)).toBe(term);
  });
});

describe("renderTerminal", () => {
  it("fits 120 columns", () => {
    for (const l of lines(term)) expect(l.length, l).toBeLessThanOrEqual(120);
  });

  it("has one row per runtime with steady RSS/USS, batch1 and batch64 p50/p99, throughput, accuracy, max abs diff", () => {
    const h = "Per runtime, steady state";
    expect(termRow(h, "runtime")).toEqual([
      "runtime", "RSS MiB", "USS MiB", "b1 p50 ms", "b1 p99 ms", "b64 p50 ms", "b64 p99 ms", "samples/s", "accuracy", "max abs diff",
    ]);
    expect(termRow(h, "python-torch")).toEqual(["python-torch", "331.00", "271.00", "0.212", "0.350", "1.900", "2.600", "33684", "97.22 %", "reference"]);
    expect(termRow(h, "native")).toEqual(["native", "4.00", "2.50", "0.018", "0.031", "0.520", "0.800", "123077", "97.22 %", "3.10e-6"]);
  });

  it("aligns columns: every row of a table has its cells ending at the same offsets", () => {
    const block = lines(term.slice(term.indexOf("Per runtime, steady state"))).slice(1, 7);
    const ends = (l: string) => [...l.matchAll(/\S+(?=\s{2,}|$)/g)].map((m) => m.index! + m[0].length);
    expect(new Set(block.map((l) => ends(l).slice(1).join(","))).size).toBe(1);
  });

  it("shows per-phase increments side by side and the native/Python ratios", () => {
    const h = "Per phase and process";
    expect(termRow(h, "import")).toEqual(["import", "+297.00 / +247.00", "+44.00 / +32.00", "+22.00 / +20.00", "-"]);
    expect(termRow(h, "first-inference")).toEqual(["first-inference", "+18.00 / +12.00", "+9.00 / +3.00", "+4.00 / +3.00", "+0.25 / +0.75"]);
    expect(termRow("Native / Python", "native / python-ort")).toEqual(["native / python-ort", "0.053", "0.050", "0.051", "0.439", "1.173"]);
  });

  it("splits tables when they do not fit a narrower width, repeating the first column", () => {
    const narrow = renderTerminal(report, { width: 80 });
    for (const l of lines(narrow).slice(1)) expect(l.length, l).toBeLessThanOrEqual(80);
    const headers = lines(narrow).filter((l) => l.startsWith("phase "));
    expect(headers.length).toBeGreaterThan(1);
    expect(headers.join(" ")).toMatch(/python-torch.*native/);
    const runtimeHeaders = lines(narrow).filter((l) => l.startsWith("runtime "));
    expect(runtimeHeaders.length).toBe(2);
    expect(runtimeHeaders[1]).toMatch(/max abs diff$/);
    expect(lines(narrow).filter((l) => l.startsWith("native ")).some((l) => / 3\.10e-6$/.test(l))).toBe(true);
  });

  it("says so when GPU is unavailable and when no runtime completed", () => {
    expect(lines(term)[0]).toBe("memlane digits  run 20261121-193000-digits  GPU unavailable: no NVIDIA driver (libnvidia-ml.so.1 not found)");
    expect(renderTerminal({ ...report, runtimes: [] })).toContain("No runtime completed.");
  });
});
