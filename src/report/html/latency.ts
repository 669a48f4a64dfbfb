/**
 * Latency charts, one per batch size: histograms with bins shared across runtimes when the
 * report carries per-call samples, else p50/p99/mean bars. The title says which.
 */
import type { LatencyStats, Report, RuntimeReport } from "../schema.ts";
import type { ChartSpec } from "./charts.ts";

/** Optional per-call samples: not in schema v1, used when a report carries them. */
type LatencyWithSamples = LatencyStats & { samples?: number[] };

function batchKeys(runtimes: RuntimeReport[]): string[] {
  const keys = new Set<string>();
  for (const r of runtimes) for (const k of Object.keys(r.latencyMs)) keys.add(k);
  return [...keys].sort((a, b) => Number(a.replace(/\D/g, "")) - Number(b.replace(/\D/g, "")));
}

/**
 * Shared bins across runtimes so that bars of one bin line up; log-spaced when the samples
 * span more than a factor of 4 (runtimes differ by 10× and more), else linear.
 */
function histogram(samplesByRuntime: number[][], bins = 24): { labels: string[]; counts: number[][]; log: boolean } {
  const all = samplesByRuntime.flat().filter((v) => Number.isFinite(v) && v > 0);
  const lo = Math.min(...all);
  const hi = Math.max(...all) * 1.000001;
  const log = hi / lo > 4;
  const edge = (i: number) => (log ? lo * (hi / lo) ** (i / bins) : lo + ((hi - lo) * i) / bins);
  const fmt = (v: number) => (v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toPrecision(2));
  const labels = Array.from({ length: bins }, (_, i) => `${fmt(edge(i))}–${fmt(edge(i + 1))}`);
  const binOf = (v: number) => {
    const f = log ? Math.log(v / lo) / Math.log(hi / lo) : (v - lo) / (hi - lo || 1);
    return Math.min(bins - 1, Math.max(0, Math.floor(f * bins)));
  };
  const counts = samplesByRuntime.map((s) => {
    const c = new Array<number>(bins).fill(0);
    for (const v of s) if (Number.isFinite(v) && v > 0) c[binOf(v)]! += 1;
    return c;
  });
  return { labels, counts, log };
}

export function latencyCharts(report: Report): ChartSpec[] {
  const rts = report.runtimes;
  return batchKeys(rts).map((key) => {
    const batch = key.replace(/^batch/, "");
    const stats = rts.map((r) => (r.latencyMs as Record<string, LatencyWithSamples | undefined>)[key]);
    const withSamples = rts.filter((_, i) => (stats[i]?.samples?.length ?? 0) > 0);
    if (withSamples.length > 0 && withSamples.length === rts.filter((_, i) => stats[i]).length) {
      const present = stats.map((s, i) => ({ s, r: rts[i]! })).filter((x) => x.s?.samples?.length);
      const h = histogram(present.map((x) => x.s!.samples!));
      return {
        id: `latency-${key}`,
        section: "latency",
        type: "bar",
        title: `Latency histogram, batch ${batch} (${h.log ? "log-spaced " : ""}bins from per-call samples)`,
        labels: h.labels,
        series: present.map((x, i) => ({ name: x.r.name, data: h.counts[i]! })),
        xTitle: "latency bin (ms)",
        yTitle: "calls",
        overlay: true,
      } satisfies ChartSpec;
    }
    // The pipelined mean (requests in flight back to back, on CUDA) as a fourth bar, only where one was measured.
    const piped = stats.some((s) => typeof s?.pipelinedMean === "number");
    const statNames = piped ? (["p50", "p99", "mean", "pipelinedMean"] as const) : (["p50", "p99", "mean"] as const);
    return {
      id: `latency-${key}`,
      section: "latency",
      type: "bar",
      title: `Latency, batch ${batch}: p50 / p99 / mean${piped ? " / pipelined mean" : ""} bars (report carries no per-call samples)`,
      labels: rts.map((r) => r.name),
      series: statNames.map((stat) => ({
        name: stat === "pipelinedMean" ? "pipelined mean" : stat,
        data: stats.map((s) => (typeof s?.[stat] === "number" ? s[stat]! : null)),
      })),
      xTitle: "runtime",
      yTitle: "ms per call",
    } satisfies ChartSpec;
  });
}

