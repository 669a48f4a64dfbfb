import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { buildCharts, renderHtmlReport, writeHtmlReport } from "../../src/report/html/index.ts";
import { run } from "../../src/cli/commands/report.ts";
import { makeReport, NATIVE_NOTES } from "./html-report.fixture.ts";

const chartsJson = (html: string) => JSON.parse(/<script type="application\/json" id="memlane-charts">(.*?)<\/script>/s.exec(html)![1]!);

describe("buildCharts", () => {
  it("has one timeline per tracked process with RSS/USS and labelled phase bands", () => {
    const charts = buildCharts(makeReport());
    const tl = charts.filter((c) => c.section === "timeline");
    expect(tl).toHaveLength(4);
    for (const c of tl) expect(c.series.map((s) => s.name)).toEqual(["RSS", "USS", "RSS at phase end (worker)"]);
    const py = tl.find((c) => c.title.includes("pid 4121"))!;
    expect(py.labels).toContain("train: epoch-2");
    expect(py.labels).toContain("python-torch: steady-inference");
    const ort = tl.find((c) => c.title.includes("pid 4180"))!;
    expect(ort.labels).toEqual(["import", "runtime-create", "model-load", "first-inference", "steady-inference"]);
    for (const b of ort.bands!) expect(b.end).toBeGreaterThan(b.start);
  });

  it("leaves out a process that ended before its first sample and had no phase marks, and names it", () => {
    const report = makeReport();
    report.timeline.push({ ...report.timeline[0]!, pid: 99999, label: "confusion-matrix", samples: [] });
    const tl = buildCharts(report).filter((c) => c.section === "timeline");
    expect(tl).toHaveLength(4);
    expect(tl.some((c) => c.title.includes("pid 99999"))).toBe(false);
    expect(renderHtmlReport(report)).toMatch(/Not charted \(ended before their first sample\): confusion-matrix \(pid 99999\)/);
  });

  it("adds GPU series only where the report has GPU figures", () => {
    const charts = buildCharts(makeReport({ gpu: true }));
    expect(charts.find((c) => c.id === "timeline-0")!.series.map((s) => s.name)).toEqual(["RSS", "USS", "GPU", "RSS at phase end (worker)"]);
    expect(charts.find((c) => c.id === "steady")!.series.map((s) => s.name)).toEqual(["RSS", "USS", "PSS", "GPU"]);
    expect(charts.some((c) => c.id === "phase-deltaGpuMiB")).toBe(true);
    expect(buildCharts(makeReport()).some((c) => c.id === "phase-deltaGpuMiB")).toBe(false);
  });

  it("groups phase increments by runtime in canonical phase order", () => {
    const c = buildCharts(makeReport()).find((x) => x.id === "phase-deltaRssMiB")!;
    expect(c.labels).toEqual(["import", "runtime-create", "model-load", "first-inference", "steady-inference"]);
    expect(c.series.map((s) => s.name)).toEqual(["python-torch", "python-ort", "node-ort", "native"]);
    expect(c.series[1]!.data[0]).toBe(31);
  });

  it("draws p50/p99/mean bars without samples and histograms with them, saying which", () => {
    const bars = buildCharts(makeReport()).filter((c) => c.section === "latency");
    expect(bars.map((c) => c.id)).toEqual(["latency-batch1", "latency-batch64"]);
    expect(bars[0]!.series.map((s) => s.name)).toEqual(["p50", "p99", "mean"]);
    expect(bars[0]!.title).toMatch(/p50 \/ p99 \/ mean/);
    const hist = buildCharts(makeReport({ latencySamples: true })).filter((c) => c.section === "latency");
    expect(hist[0]!.title).toMatch(/histogram/);
    expect(hist[0]!.series.map((s) => s.name)).toEqual(["python-torch", "python-ort", "node-ort", "native"]);
    expect(hist[0]!.labels).toHaveLength(24);
    const total = (hist[0]!.series[0]!.data as number[]).reduce((a, b) => a + b, 0);
    expect(total).toBe(200);
  });

  it("adds a pipelined-mean bar only where a runtime measured one", () => {
    const bars = buildCharts(makeReport({ pipelined: true })).filter((c) => c.section === "latency");
    expect(bars[0]!.series.map((s) => s.name)).toEqual(["p50", "p99", "mean", "pipelined mean"]);
    expect(bars[0]!.title).toMatch(/p50 \/ p99 \/ mean \/ pipelined mean/);
    expect(bars[1]!.series[3]!.data).toEqual([null, null, null, 0.256]);
  });

  it("puts every stage on the stage timeline, coloured by worker", () => {
    const c = buildCharts(makeReport()).find((x) => x.id === "stages")!;
    expect(c.series.map((s) => s.name)).toEqual(["python", "node", "memlane-rt"]);
    expect(c.labels).toContain("infer-trt (skipped)");
    const train = c.series[0]!.data[0] as [number, number];
    expect(train[0]).toBeGreaterThanOrEqual(0);
    expect(train[1]).toBeGreaterThan(train[0]);
  });
});

describe("renderHtmlReport", () => {
  it("is self-contained: no external script, style, image or font", () => {
    const html = renderHtmlReport(makeReport());
    expect(html).not.toMatch(/<script[^>]+src=/i);
    expect(html).not.toMatch(/<link/i);
    expect(html).not.toMatch(/https?:\/\/(?!www\.w3\.org)[^"'\s]*\.(js|css|png|woff2?)/i);
    expect(html).toContain("Chart.js v4");
    expect(html.match(/<canvas id="chart-/g)!.length).toBe(chartsJson(html).length);
    expect(html).toContain("GPU: unavailable");
    expect(html).toContain('id="numerics-table"');
  });

  it("shows pipelined samples/s and backend notes only when a runtime has them", () => {
    const cpu = renderHtmlReport(makeReport());
    expect(cpu).not.toContain("pipelined samples/s");
    expect(JSON.stringify(chartsJson(cpu))).not.toMatch(/pipelined/);
    expect(cpu).not.toContain('id="backend-notes"');
    const html = renderHtmlReport(makeReport({ gpu: true }));
    const table = /<table id="runtimes">.*?<\/table>/s.exec(html)![0];
    expect(table).toContain("<th>samples/s</th><th>pipelined samples/s</th><th>versions</th>");
    const row = (name: string) => /<tr>(.*?)<\/tr>/.exec(table.slice(table.indexOf(`<tr><td>${name}</td>`)))![1]!.split("</td><td>");
    expect(row("native").slice(-3, -1)).toEqual(["168421", "250000"]);
    expect(row("python-ort").slice(-3, -1)).toEqual(["104918", "—"]);
    expect(html).toContain(`<ul id="backend-notes"><li><strong>native</strong>: ${NATIVE_NOTES}</li></ul>`);
    // Escaped like every other report text; an older report without the fields renders as CPU did.
    const r = makeReport({ pipelined: true });
    r.runtimes[3]!.backendNotes = "<script>x</script>";
    expect(renderHtmlReport(r)).toContain("<strong>native</strong>: &lt;script&gt;x&lt;/script&gt;");
    const old = JSON.parse(JSON.stringify(makeReport())) as ReturnType<typeof makeReport>;
    for (const rt of old.runtimes as Array<Partial<(typeof old.runtimes)[number]>>) {
      delete rt.pipelinedThroughputPerS;
      delete rt.backendNotes;
    }
    expect(renderHtmlReport(old)).toBe(cpu);
  });

  it("escapes report text in markup and in the embedded data", () => {
    const r = makeReport();
    r.pipeline = `</script><img src=x onerror=alert(1)>`;
    r.runtimes[0]!.name = "<b>torch</b>";
    const html = renderHtmlReport(r);
    expect(html).not.toContain("<img src=x");
    expect(html).not.toContain("<b>torch</b>");
    expect(chartsJson(html).find((c: { id: string }) => c.id === "steady").labels[0]).toBe("<b>torch</b>");
  });
});

describe("writeHtmlReport and memlane report", () => {
  const silent = () => {
    const lines: string[] = [];
    return { lines, io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) } };
  };

  it("writes report.html next to report.json, leaving no temp file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memlane-html-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "report.json"), JSON.stringify(makeReport()));
    const out = await writeHtmlReport(dir);
    expect(out).toBe(join(dir, "report.html"));
    expect(readFileSync(out, "utf8")).toMatch(/^<!doctype html>/);
    expect(readdirSync(dir).sort()).toEqual(["report.html", "report.json"]);
  });

  it("re-renders from the CLI and names the problem on bad input", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memlane-cli-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const s = silent();
    expect(await run([join(dir, "nope")], s.io)).toBe(1);
    expect(s.lines.at(-1)).toMatch(/run directory not found/);
    expect(await run([dir], s.io)).toBe(1);
    expect(s.lines.at(-1)).toMatch(/no report\.json/);
    writeFileSync(join(dir, "report.json"), "{not json");
    expect(await run([dir], s.io)).toBe(1);
    expect(s.lines.at(-1)).toMatch(/invalid JSON in .*report\.json/);
    writeFileSync(join(dir, "report.json"), JSON.stringify({ ...makeReport(), runtimes: {} }));
    expect(await run([dir], s.io)).toBe(1);
    expect(s.lines.at(-1)).toMatch(/field "runtimes": expected array, received object/);
    expect(await run([], s.io)).toBe(2);
    writeFileSync(join(dir, "report.json"), JSON.stringify(makeReport()));
    expect(await run([dir], s.io)).toBe(0);
    expect(existsSync(join(dir, "report.html"))).toBe(true);
  });
});
