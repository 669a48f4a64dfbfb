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
  const device = (e.device ?? []).filter((d) => d.estimate);
  if (device.length > 0) charts.push({
    id: "estimate-vs-measured-device",
    section: "estimate",
    type: "bar",
    title: "Device memory on CUDA (memlane-rt): estimate (before the run) vs this process's GPU MiB",
    labels: device.map((d) => `${d.runtime} (${d.stage})`),
    series: [
      { name: "estimated after the load", data: device.map((d) => r2(d.estimate!.loadMiB)) },
      { name: "measured after the load", data: device.map((d) => (d.measured.loadMiB === null ? null : r2(d.measured.loadMiB))) },
      { name: "measured at the end", data: device.map((d) => (d.measured.endMiB === null ? null : r2(d.measured.endMiB))) },
      { name: "estimated peak", data: device.map((d) => r2(d.estimate!.peakMiB)) },
      { name: "measured peak", data: device.map((d) => (d.measured.peakMiB === null ? null : r2(d.measured.peakMiB))) },
    ],
    xTitle: "runtime",
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
