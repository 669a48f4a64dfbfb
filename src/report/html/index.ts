/**
 * runs/<runId>/report.html: one self-contained page (Chart.js, the page script and styles
 * inlined; no network) drawn from report.json.
 */
import { readFileSync } from "node:fs";
import { readFile, rename, writeFile, unlink } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Report } from "../schema.ts";
import { buildCharts, emptyTracks, reportT0, type ChartSpec } from "./charts.ts";
import { kindsTables } from "./kinds.ts";
import { distributedTables, esc, gpuBlock, hostLine, numericsTable, ratiosTable, runtimesTable, stagesTable } from "./tables.ts";
import { STYLE } from "./style.ts";

export type { ChartSpec } from "./charts.ts";
export { buildCharts } from "./charts.ts";

let chartJsSource: string | undefined;
let clientSource: string | undefined;

/** Chart.js's minified UMD build, read once from node_modules. */
function chartJs(): string {
  if (chartJsSource === undefined) {
    const entry = createRequire(import.meta.url).resolve("chart.js");
    chartJsSource = readFileSync(join(dirname(entry), "chart.umd.min.js"), "utf8");
  }
  return chartJsSource;
}

function client(): string {
  clientSource ??= readFileSync(join(dirname(fileURLToPath(import.meta.url)), "client.js"), "utf8");
  return clientSource;
}

/** Inline script text must not close its own element. */
const inlineScript = (src: string) => src.replace(/<\/(script)/gi, "<\\/$1");
/** JSON inside <script type="application/json">: `<` escaped so no tag can open or close. */
const inlineJson = (value: unknown) => JSON.stringify(value).replace(/</g, "\\u003c");

function figure(spec: ChartSpec): string {
  const tall = spec.section === "stages" ? Math.max(180, 34 * spec.labels.length + 90) : spec.section === "timeline" ? 300 : spec.section === "kinds" ? 360 : 280;
  return `<figure class="chart chart-${spec.section}" data-chart="${esc(spec.id)}">
<figcaption>${esc(spec.title)}</figcaption>
<div class="chart-box" style="height:${tall}px"><canvas id="chart-${esc(spec.id)}" role="img" aria-label="${esc(spec.title)}"></canvas></div>
</figure>`;
}

/** Names the processes that ended before the sampler's first reading (nothing to draw). */
function notCharted(report: Report): string {
  const empty = emptyTracks(report);
  if (!empty.length) return "";
  return ` Not charted (ended before their first sample): ${empty.map((t) => `${esc(t.label)} (pid ${t.pid})`).join(", ")}.`;
}

/** A failed run's mark and the run's notes (concurrent runs, retries...), under the header. */
function runNotes(report: Report): string {
  const failed = report.outcome === "failed" ? `<p class="note"><strong>This run failed: a partial report of the stages that completed.</strong></p>` : "";
  const notes = report.notes ?? [];
  return failed + (notes.length ? `<ul class="note">${notes.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>` : "");
}

function section(id: string, title: string, body: string, note = ""): string {
  if (!body.trim()) return "";
  return `<section id="${id}"><h2>${esc(title)}</h2>${note ? `<p class="note">${note}</p>` : ""}\n${body}\n</section>`;
}

/** Renders the whole page. Pure: the same report gives the same bytes. */
export function renderHtmlReport(report: Report): string {
  const charts = buildCharts(report);
  const t0 = reportT0(report);
  const of = (s: ChartSpec["section"]) => charts.filter((c) => c.section === s).map(figure).join("\n");
  const started = new Date(t0 || Date.parse(report.createdAt)).toISOString();
  const body = [
    `<header><h1>memlane report — ${esc(report.pipeline)}</h1>
<p class="meta">run <code>${esc(report.runId)}</code> · created ${esc(report.createdAt)} · t = 0 at ${esc(started)}</p>
<p class="meta">${hostLine(report)}</p>${gpuBlock(report)}${runNotes(report)}</header>`,
    section("summary", "Runtimes", runtimesTable(report) + ratiosTable(report)),
    ...(report.distributed?.length ? [section("distributed", "Distributed training, per rank vs one process", distributedTables(report),
      "Peak RSS: the highest reading over the process's phases. params / grads / optimizer: bytes of the tensors the process held after its last step (an FSDP rank counts its shard); see docs/distributed.md.")] : []),
    section("timeline", "Memory over time, per process", of("timeline"),
      "Orchestrator samples of /proc/&lt;pid&gt;/smaps_rollup (and NVML where available); shaded bands are the process's own phase marks." +
        notCharted(report)),
    section("phases", "Memory by phase", of("phases"),
      "Increment = reading at the phase end minus the reading at its start (worker's own /proc/self)."),
    section("kinds", "Where the RAM goes, by kind of mapping", of("kinds") + kindsTables(report),
      "Each process's own /proc/self/smaps at its phase ends, grouped by kind: libraries by package, heap, anonymous memory, " +
        "thread stacks, model and plan files, /dev/shm segments, GPU driver mappings. One colour per kind on every chart. " +
        "Growth of a phase = its end minus the reading before it (docs/memory.md)."),
    section("estimate", "Estimate vs measured", of("estimate"),
      "Predicted before the run from the ONNX graph and this machine's calibration (memlane estimate; docs/memory.md); the naive formula is parameters × 4 B + a batch of inputs × 4 B."),
    section("latency", "Latency", of("latency"), "Measured inside each worker around the runtime's own call; no transport included."),
    section("numerics", "Numerics", numericsTable(report)),
    section("stages", "Pipeline stages", of("stages") + stagesTable(report, t0)),
  ].join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>memlane — ${esc(report.pipeline)} — ${esc(report.runId)}</title>
<style>${STYLE}</style>
</head><body>
${body}
<script type="application/json" id="memlane-charts">${inlineJson(charts)}</script>
<script>${inlineScript(chartJs())}</script>
<script>${inlineScript(client())}</script>
</body></html>
`;
}

/** Reads `<runDir>/report.json`, writes `<runDir>/report.html` atomically; returns its path. */
export async function writeHtmlReport(runDir: string): Promise<string> {
  const report = JSON.parse(await readFile(join(runDir, "report.json"), "utf8")) as Report;
  const out = join(runDir, "report.html");
  const tmp = `${out}.tmp-${process.pid}`;
  try {
    await writeFile(tmp, renderHtmlReport(report));
    await rename(tmp, out);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  return out;
}
