/** report.html's estimate-vs-measured chart: per runtime, the calibrated estimate beside the measurement and the naive formula. */
import type { Report } from "../schema.ts";
import type { ChartSpec } from "./charts.ts";

const r2 = (v: number) => Number(v.toFixed(2));

export function estimateCharts(report: Report): ChartSpec[] {
  const e = report.estimates;
  if (!e || e.status !== "ok") return [];
  const charts: ChartSpec[] = [];
  const t = e.training;
  if (t) charts.push({
    id: "estimate-vs-measured-training",
    section: "estimate",
    type: "bar",
    title: `Training peak RSS (${t.stage}, ${t.arch}): estimate (before the run) vs measured, and the naive formula`,
    labels: [t.stage],
    series: [
      { name: "estimated peak RSS", data: [r2(t.estimateMiB)] },
      { name: "measured peak RSS", data: [r2(t.measuredMiB)] },
      { name: "naive formula (seeds/003)", data: [r2(t.naiveMiB)] },
    ],
    xTitle: "stage",
    yTitle: "MiB",
  });
  if (e.runtimes.length === 0) return charts;
  const steady = e.runtimes.map((r) => r.phases.at(-1));
  const peak = (i: number, side: "estimateMiB" | "measuredMiB") => r2(Math.max(...e.runtimes[i]!.phases.map((p) => p.peak[side])));
  return [...charts, {
    id: "estimate-vs-measured",
    section: "estimate",
    type: "bar",
    title: "Steady RSS and peak RSS: calibrated estimate (before the run) vs measured, and the naive formula",
    labels: e.runtimes.map((r) => r.runtime),
    series: [
      { name: "estimated steady RSS", data: steady.map((p) => (p ? r2(p.rss.estimateMiB) : null)) },
      { name: "measured steady RSS", data: steady.map((p) => (p ? r2(p.rss.measuredMiB) : null)) },
      { name: "estimated peak RSS", data: e.runtimes.map((_, i) => peak(i, "estimateMiB")) },
      { name: "measured peak RSS", data: e.runtimes.map((_, i) => peak(i, "measuredMiB")) },
      ...(e.naiveMiB !== null ? [{ name: "naive formula (seeds/003)", data: e.runtimes.map(() => r2(e.naiveMiB!)) }] : []),
    ],
    xTitle: "runtime",
    yTitle: "MiB",
  }];
}
