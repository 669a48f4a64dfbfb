/**
 * The report's tables as HTML strings: numerics, runtimes, ratios, stages, GPU and host.
 * Every cell is escaped; an unmeasured figure prints as "n/a", an unavailable GPU figure as
 * "unavailable" (never 0).
 */
import { comparisonRows, DISTRIBUTED_HEADER, distributedTitle } from "../distributed.ts";
import type { Report } from "../schema.ts";

export function esc(value: unknown): string {
  return String(value)
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export function num(v: number | null | undefined, digits = 1, unit = ""): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "n/a";
  return `${v.toFixed(digits)}${unit}`;
}

function table(id: string, head: string[], rows: string[][], caption?: string): string {
  const th = head.map((h) => `<th>${esc(h)}</th>`).join("");
  const trs = rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("\n");
  const cap = caption ? `<caption>${esc(caption)}</caption>` : "";
  return `<table id="${esc(id)}">${cap}<thead><tr>${th}</tr></thead><tbody>\n${trs}\n</tbody></table>`;
}

function sci(v: number | null): string {
  if (v === null || !Number.isFinite(v)) return "n/a";
  return v === 0 ? "0" : v.toExponential(2);
}

export function numericsTable(report: Report): string {
  const ref = report.numerics.reference;
  const rows = report.numerics.runtimes.map((r) => [
    esc(r.name) + (r.name === ref ? " <em>(reference)</em>" : ""),
    r.name === ref ? "—" : sci(r.maxAbsDiff),
    r.accuracy === null ? "n/a" : `${(r.accuracy * 100).toFixed(2)}%`,
  ]);
  const cap = ref ? `max |output − ${ref} output| over the held-out set` : "no reference runtime ran";
  return table("numerics-table", ["runtime", "max abs diff", "held-out accuracy"], rows, cap) + outputsTable(report);
}

/** Max abs diff per output, runtimes as columns; "" unless some runtime has several outputs. */
function outputsTable(report: Report): string {
  const ran = report.runtimes.filter((r) => (r.outputs?.length ?? 0) > 1);
  if (ran.length === 0) return "";
  const ref = report.numerics.reference;
  const names = [...new Set(ran.flatMap((r) => r.outputs!.map((o) => o.name)))];
  const rows = names.map((n) => [esc(n), ...ran.map((r) => {
    const o = r.outputs!.find((x) => x.name === n);
    return r.name === ref ? "—" : o ? sci(o.maxAbsDiff) : "n/a";
  })]);
  return table("numerics-outputs", ["output", ...ran.map((r) => r.name)], rows, `max abs diff per output vs ${ref ?? "the reference"}`);
}

/** Runtimes that did not run, with why; "" when every runtime ran. */
export function notRunList(report: Report): string {
  const items = (report.runtimesNotRun ?? []).map((u) => `<li><strong>${esc(u.name)}</strong> ${esc(u.status)}: ${esc(u.error.name)}: ${esc(u.error.message)}</li>`);
  return items.length ? `<ul class="not-run">${items.join("")}</ul>` : "";
}

export function runtimesTable(report: Report): string {
  const gpuCell = (v: number | null) => (v === null ? "unavailable" : num(v, 1));
  // Pipelined samples/s only when a runtime measured it (on CUDA: memlane-rt, python-torch); "—" for the others.
  // Older reports lack the field: read as null.
  const pipelined = report.runtimes.some((r) => (r.pipelinedThroughputPerS ?? null) !== null);
  const rows = report.runtimes.map((r) => {
    const b1 = (r.latencyMs as Record<string, { p50: number } | undefined>)["batch1"];
    return [
      esc(r.name),
      esc(r.process.kind),
      String(r.pid),
      esc(r.device),
      num(r.steady.rssMiB),
      num(r.steady.ussMiB),
      num(r.steady.pssMiB),
      gpuCell(r.steady.gpuMiB),
      b1 ? num(b1.p50, 3) : "n/a",
      num(r.throughputPerS, 0),
      ...(pipelined ? [r.pipelinedThroughputPerS == null ? "—" : num(r.pipelinedThroughputPerS, 0)] : []),
      Object.entries(r.versions).map(([k, v]) => `${esc(k)} ${esc(v)}`).join(", "),
    ];
  });
  return table(
    "runtimes",
    [
      "runtime", "process", "pid", "device", "steady RSS MiB", "steady USS MiB", "steady PSS MiB", "steady GPU MiB", "batch 1 p50 ms", "samples/s",
      ...(pipelined ? ["pipelined samples/s"] : []), "versions",
    ],
    rows,
    pipelined ? "pipelined: requests submitted back to back and drained; — where a runtime does not time that way" : undefined,
  ) + backendNotesList(report) + notRunList(report);
}

/** What each runtime's backend did with its switches, as a short list; "" when no runtime has notes. */
export function backendNotesList(report: Report): string {
  const items = report.runtimes.filter((r) => r.backendNotes).map((r) => `<li><strong>${esc(r.name)}</strong>: ${esc(r.backendNotes)}</li>`);
  return items.length ? `<div class="backend-notes"><p class="note">Backend notes</p><ul id="backend-notes">${items.join("")}</ul></div>` : "";
}

export function ratiosTable(report: Report): string {
  const ratios = report.comparison.ratios;
  if (!ratios.length) return "";
  const rows = ratios.map((r) => [esc(r.counter), esc(r.numerator), esc(r.denominator), r.value === null ? "n/a" : `${r.value.toFixed(2)}×`]);
  const body = table("ratios", ["counter", "numerator", "denominator", "ratio"], rows, "numerator ÷ denominator, same counter");
  // Every non-Python runtime against every Python one, per counter: long, so folded.
  return `<details class="ratios"><summary>${ratios.length} ratios between runtimes (numerator ÷ denominator)</summary>${body}</details>`;
}

export function stagesTable(report: Report, t0: number): string {
  const rows = report.stages.map((s) => [
    esc(s.name),
    esc(s.kind),
    esc(s.worker),
    s.pid === null ? "—" : String(s.pid),
    num((s.startMs - t0) / 1000, 2, " s"),
    num((s.endMs - s.startMs) / 1000, 2, " s"),
    `<span class="status-${esc(s.status)}">${esc(s.status)}</span>` + (s.error ? ` ${esc(s.error.name)}: ${esc(s.error.message)}` : ""),
  ]);
  return table("stage-table", ["stage", "kind", "worker", "pid", "start", "duration", "status"], rows);
}

export function gpuBlock(report: Report): string {
  const g = report.gpu;
  if (g.status === "unavailable")
    return `<p class="gpu-unavailable">GPU: unavailable — ${esc(g.reason ?? "no reason given")}. GPU figures are omitted, not zero.</p>`;
  const rows = g.devices.map((d) => [String(d.index), esc(d.name), num(d.totalMiB, 0), d.usedMiB === null ? "n/a" : num(d.usedMiB, 0), esc(d.driver ?? "n/a")]);
  return table("gpu-devices", ["index", "device", "total MiB", "used MiB", "driver"], rows);
}

export function hostLine(report: Report): string {
  const h = report.host;
  const parts = [
    `${h.cpuModel} × ${h.cores} cores`,
    `${num(h.memTotalMiB / 1024, 1)} GiB RAM`,
    `${h.platform} ${h.kernel}`,
    `node ${h.node}`,
    h.python ? `python ${h.python}` : "no python worker",
  ];
  return esc(parts.join(" · "));
}

/** One table a distributed train stage: the single process and every rank (report/distributed.ts). */
export function distributedTables(report: Report): string {
  return (report.distributed ?? [])
    .map((d) => table(`distributed-${d.stage}`, DISTRIBUTED_HEADER, comparisonRows(d).map((r) => r.map(esc)), `distributed ${distributedTitle(d)}`))
    .join("\n");
}
