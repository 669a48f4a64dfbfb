/**
 * Opens report.html in Debian's chromium (playwright-core, no downloaded browser) and checks
 * that every chart was drawn with the series and labels the report implies, that nothing was
 * fetched from the network and that the console stayed clean; saves a full-page report.png
 * next to the report. Everything goes to a temporary directory, removed afterwards (set
 * MEMLANE_KEEP_REPORTS=1 to keep it for a human to look at: its path is printed).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCharts, writeHtmlReport } from "../../src/report/html/index.ts";
import { CHROMIUM, chromiumTmpBase, openBrowser, screenshotPage, screenshotReport, screenshotUnavailable, waitForCharts } from "../../src/report/html/screenshot.ts";
import type { Report } from "../../src/report/schema.ts";
import { makeReport } from "../unit/html-report.fixture.ts";
import { buildReport } from "../../src/report/build.ts";
import { breakdownRun, realisticRun } from "../unit/report-fixture.ts";

const missing = screenshotUnavailable(CHROMIUM);
const haveChromium = missing === null;
if (!haveChromium) console.log(`[report-browser] skipped: ${missing}`);

interface DrawnChart {
  id: string;
  type: string;
  series: string[];
  labels: string[];
  points: number[];
  canvas: { width: number; height: number };
}

describe.skipIf(!haveChromium)("report.html in chromium", () => {
  let browser: Awaited<ReturnType<typeof openBrowser>>;

  // The same chromium, flags and profile handling as `memlane run`'s report.png.
  // Never the repository's runs/: the user's runs live there.
  const out = mkdtempSync(join(tmpdir(), "memlane-report-browser-"));
  beforeAll(async () => {
    browser = await openBrowser({ tmpDir: out });
  });
  afterAll(async () => {
    await browser?.close();
    if (process.env.MEMLANE_KEEP_REPORTS === "1") console.log(`[report-browser] reports kept in ${out}`);
    else rmSync(out, { recursive: true, force: true });
  });

  async function open(name: string, report: Report) {
    const runDir = resolve(out, name);
    mkdirSync(runDir, { recursive: true });
    writeFileSync(join(runDir, "report.json"), JSON.stringify(report, null, 1));
    const htmlPath = await writeHtmlReport(runDir);
    const page = await browser.context.newPage();
    const problems: string[] = [];
    page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console.${m.type()}: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    // Anything but the file itself is a request the self-contained page must not make.
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (url === pathToFileURL(htmlPath).href) return route.continue();
      problems.push(`request: ${url}`);
      return route.abort();
    });
    await page.goto(pathToFileURL(htmlPath).href);
    await waitForCharts(page);
    const state = (await page.evaluate("window.__memlane")) as { charts: DrawnChart[]; errors: string[] };
    return { runDir, page, problems, state };
  }

  /** Share of canvas pixels that are not transparent: a drawn chart is far from blank. */
  async function inkRatio(page: import("playwright-core").Page, id: string): Promise<number> {
    return (await page.evaluate(`(() => {
      const c = document.getElementById(${JSON.stringify(`chart-${id}`)});
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let ink = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) ink++;
      return ink / (c.width * c.height);
    })()`)) as number;
  }

  // Our own fixture on CPU, the same with GPU figures and per-call latency samples, and the
  // report builder's own output (src/report/build.ts from test/unit/report-fixture.ts).
  const cases: Array<[string, { gpu: boolean; samples: boolean }, () => Report]> = [
    ["report-browser-cpu", { gpu: false, samples: false }, () => makeReport()],
    ["report-browser-gpu", { gpu: true, samples: true }, () => makeReport({ gpu: true, latencySamples: true })],
    ["report-browser-built", { gpu: false, samples: false }, () => buildReport(realisticRun())],
    ["report-browser-kinds", { gpu: false, samples: false }, () => buildReport(breakdownRun())],
  ];
  for (const [name, opts, make] of cases) {
    it(`${name}: draws every chart with the report's series and labels`, async () => {
      const report = make();
      const expected = buildCharts(report);
      const { runDir, page, problems, state } = await open(name, report);
      try {
        expect(state.errors).toEqual([]);
        expect(state.charts.map((c) => c.id)).toEqual(expected.map((c) => c.id));
        for (const spec of expected) {
          const drawn = state.charts.find((c) => c.id === spec.id)!;
          expect(drawn.series, spec.id).toEqual(spec.series.map((s) => s.name));
          expect(drawn.labels, spec.id).toEqual(spec.labels);
          expect(drawn.points, spec.id).toEqual(spec.series.map((s) => s.data.length));
          expect(drawn.canvas.width, spec.id).toBeGreaterThan(400);
          expect(drawn.canvas.height, spec.id).toBeGreaterThan(150);
          expect(await inkRatio(page, spec.id), spec.id).toBeGreaterThan(0.02);
        }
        // The sections the brief asks for, with their expected content.
        const timeline = state.charts.filter((c) => c.id.startsWith("timeline-"));
        expect(timeline).toHaveLength(report.timeline.length);
        for (const t of timeline) expect(t.series.slice(0, 2)).toEqual(["RSS", "USS"]);
        expect(timeline.every((t) => t.series.includes("GPU"))).toBe(opts.gpu);
        expect(state.charts.find((c) => c.id === "phase-deltaRssMiB")!.series).toEqual(report.runtimes.map((r) => r.name));
        expect(state.charts.find((c) => c.id === "stages")!.type).toBe("bar-horizontal");
        // Where the RAM goes: stacked kind bars only where a runtime sent per-mapping summaries.
        const kinds = state.charts.filter((c) => c.id.startsWith("steady-kinds") || c.id.startsWith("growth-kinds-"));
        expect(kinds.length > 0).toBe(name === "report-browser-kinds");
        const latencyTitle = await page.locator('figure[data-chart="latency-batch1"] figcaption').textContent();
        expect(latencyTitle).toMatch(opts.samples ? /histogram/ : /p50 \/ p99 \/ mean/);
        const numericsRows = await page.locator("#numerics-table tbody tr").count();
        expect(numericsRows).toBe(report.numerics.runtimes.length);
        expect(await page.locator("#stage-table tbody tr").count()).toBe(report.stages.length);
        await screenshotPage(page, join(runDir, "report.png"));
        expect(existsSync(join(runDir, "report.png"))).toBe(true);
        expect(problems).toEqual([]);
      } finally {
        await page.close();
      }
    });
  }
});

describe.skipIf(!haveChromium)("report.png from a deep run directory", () => {
  // A run's scratch directory can be far too deep for chromium's Unix socket (107 bytes):
  // chromium then runs under the OS temp dir instead, and still leaves nothing anywhere.
  it("screenshots, and leaves nothing in the deep directory or the temp dir", async () => {
    const out = mkdtempSync(join(tmpdir(), "memlane-report-deep-"));
    try {
      const deep = join(out, "a-long-project-folder-name".repeat(3), "runs", "20261122-235959-abcdef", ".tmp");
      mkdirSync(deep, { recursive: true });
      expect(chromiumTmpBase(deep)).not.toBe(deep);
      expect(chromiumTmpBase(out)).toBe(out);
      const runDir = join(out, "run");
      mkdirSync(runDir);
      writeFileSync(join(runDir, "report.json"), JSON.stringify(makeReport(), null, 1));
      const html = await writeHtmlReport(runDir);
      // The OS temp dir of this file's process only: test files run side by side, and another
      // one's chromium (a report rendered under a deep run directory) may create its own
      // memlane-chromium-* in the shared temp dir meanwhile (a CI run once found one here).
      const savedTmp = process.env.TMPDIR;
      const privateTmp = mkdtempSync(join(chromiumTmpBase(tmpdir()), "mlc-"));
      process.env.TMPDIR = privateTmp;
      try {
        expect(chromiumTmpBase(deep)).toBe(privateTmp);
        await screenshotReport(html, join(runDir, "report.png"), { tmpDir: deep });
        expect(statSync(join(runDir, "report.png")).size).toBeGreaterThan(10_000);
        expect(readdirSync(deep)).toEqual([]);
        expect(readdirSync(privateTmp)).toEqual([]);
      } finally {
        if (savedTmp === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = savedTmp;
        rmSync(privateTmp, { recursive: true, force: true });
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
