/**
 * "Where the RAM goes" in report.html: a stacked bar per runtime at the steady state and, per
 * runtime, the growth of each kind per phase; each kind of mapping has one colour on every
 * chart (KIND_COLOURS), so torch's libraries look the same in every bar. Also the table of
 * the steady-state kinds with the files under each.
 */
import { fileName, steadyBreakdown } from "../breakdown.ts";
import type { MemoryBreakdown, Report } from "../schema.ts";
import type { ChartSpec } from "./charts.ts";
import { esc, num } from "./tables.ts";

/** Fixed colours of the kinds every report has; library packages of no fixed colour hash into SPARE. */
export const KIND_COLOURS: Record<string, string> = {
  "lib:torch": "#ee4c2c",
  "lib:onnxruntime": "#1f77b4",
  "lib:CUDA": "#76b900",
  "lib:TensorRT": "#4b7d00",
  "lib:numpy": "#4dabcf",
  "lib:python": "#ffd43b",
  "lib:node": "#3c873a",
  "lib:memlane": "#b15928",
  "lib:OpenBLAS": "#a6761d",
  "lib:zmq": "#e377c2",
  "lib:system": "#b0b0b0",
  heap: "#ff7f0e",
  anonymous: "#54478c",
  arenas: "#c5b0d5",
  stacks: "#bcbd22",
  "model-files": "#17becf",
  shm: "#2ca02c",
  "gpu-driver": "#005f00",
  other: "#7f7f7f",
};
const SPARE = ["#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#dadaeb", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#393b79"];

export function kindColour(kind: string): string {
  const fixed = KIND_COLOURS[kind];
  if (fixed) return fixed;
  let h = 0;
  for (const c of kind) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return SPARE[h % SPARE.length]!;
}

/** Kinds seen in any of the breakdowns, biggest (largest RSS anywhere) first: one series each. */
function kindsOf(bs: readonly MemoryBreakdown[]): Array<{ kind: string; label: string }> {
  const seen = new Map<string, { label: string; max: number }>();
  for (const b of bs)
    for (const k of b.kinds) seen.set(k.kind, { label: k.label, max: Math.max(seen.get(k.kind)?.max ?? 0, Math.abs(k.rssMiB), Math.abs(k.deltaRssMiB ?? 0)) });
  return [...seen.entries()].sort((a, b) => b[1].max - a[1].max).map(([kind, { label }]) => ({ kind, label }));
}

export function kindCharts(report: Report): ChartSpec[] {
  const steady = report.runtimes.map((r) => ({ name: r.name, b: steadyBreakdown(r) })).filter((x): x is { name: string; b: MemoryBreakdown } => x.b !== null);
  if (steady.length === 0) return [];
  const kinds = kindsOf(steady.map((s) => s.b));
  const charts: ChartSpec[] = [{
    id: "steady-kinds",
    section: "kinds",
    type: "bar",
    title: "Steady state: RSS by kind of mapping, per runtime (/proc/<pid>/smaps at the end of steady-inference)",
    labels: steady.map((s) => s.name),
    series: kinds.map(({ kind, label }) => ({
      name: label,
      color: kindColour(kind),
      data: steady.map((s) => s.b.kinds.find((k) => k.kind === kind)?.rssMiB ?? 0),
    })),
    xTitle: "runtime",
    yTitle: "RSS MiB",
    stacked: true,
  }, {
    // The same, as shares: memlane-rt's few MiB are invisible on the MiB scale beside torch.
    id: "steady-kinds-share",
    section: "kinds",
    type: "bar",
    title: "Steady state: share of RSS by kind of mapping, per runtime (%)",
    labels: steady.map((s) => s.name),
    series: kinds.map(({ kind, label }) => ({
      name: label,
      color: kindColour(kind),
      data: steady.map((s) => {
        const k = s.b.kinds.find((x) => x.kind === kind);
        return k && s.b.totalRssMiB > 0 ? Math.round((k.rssMiB / s.b.totalRssMiB) * 1000) / 10 : 0;
      }),
    })),
    xTitle: "runtime",
    yTitle: "% of RSS",
    stacked: true,
  }];
  for (const r of report.runtimes) {
    const phases = r.phases.filter((p) => p.breakdown && p.breakdown.growthFrom !== null);
    if (phases.length === 0) continue;
    const ks = kindsOf(phases.map((p) => p.breakdown!));
    charts.push({
      id: `growth-kinds-${r.name}`,
      section: "kinds",
      type: "bar",
      title: `${r.name} (pid ${r.pid}): Δ RSS per phase by kind of mapping`,
      labels: phases.map((p) => p.name),
      series: ks.map(({ kind, label }) => ({
        name: label,
        color: kindColour(kind),
        data: phases.map((p) => p.breakdown!.kinds.find((k) => k.kind === kind)?.deltaRssMiB ?? 0),
      })),
      xTitle: "phase",
      yTitle: "Δ RSS MiB",
      stacked: true,
    });
  }
  return charts;
}

/** Per runtime, the steady-state kinds with the files under each (folded). "" without breakdowns. */
export function kindsTables(report: Report): string {
  const parts = report.runtimes.flatMap((r) => {
    const b = steadyBreakdown(r);
    if (!b) return [];
    const rows = b.kinds.map((k) => {
      const files = k.files.map((f) => `${esc(fileName(f.path))} ${num(f.rssMiB, 2)}`).join(", ");
      const swatch = `<span class="swatch" style="background:${kindColour(k.kind)}"></span>`;
      return `<tr><td>${swatch}${esc(k.label)}</td><td>${num(k.rssMiB, 2)}</td><td>${num(k.pssMiB, 2)}</td><td>${num(k.ussMiB, 2)}</td>` +
        `<td>${num(k.privateDirtyMiB, 2)}</td><td class="files" title="${esc(k.files.map((f) => f.path).join("\n"))}">${files}</td></tr>`;
    });
    return [`<details class="kinds"><summary>${esc(r.name)} (pid ${r.pid}): RSS ${num(b.totalRssMiB, 2)} MiB in ${b.kinds.length} kinds</summary>` +
      `<table id="kinds-${esc(r.name)}"><thead><tr><th>kind</th><th>RSS MiB</th><th>PSS MiB</th><th>USS MiB</th><th>private dirty MiB</th><th>files (RSS MiB)</th></tr></thead>` +
      `<tbody>${rows.join("\n")}</tbody></table></details>`];
  });
  return parts.join("\n");
}
