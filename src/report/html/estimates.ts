/** report.html's estimate-vs-measured chart: per runtime, the calibrated estimate beside the measurement and the naive formula. */
import type { Report } from "../schema.ts";
import type { ChartSpec } from "./charts.ts";

const r2 = (v: number) => Number(v.toFixed(2));

export function estimateCharts(report: Report): ChartSpec[] {
  const e = report.estimates;
  if (!e || e.status !== "ok" || e.runtimes.length === 0) return [];
  const steady = e.runtimes.map((r) => r.phases.at(-1));
  const peak = (i: number, side: "estimateMiB" | "measuredMiB") => r2(Math.max(...e.runtimes[i]!.phases.map((p) => p.peak[side])));
  return [{
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
