/** The estimate-vs-measured section of report.md and its lines in the terminal summary. */
import type { Report } from "./schema.ts";
import { mdTable, num } from "./format.ts";
import type { DeviceEstimateCheck } from "../estimate/report-device.ts";

const pctText = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? "—" : `${x > 0 ? "+" : ""}${x.toFixed(1)} %`);

export function estimatesMarkdown(report: Report): string | null {
  const e = report.estimates;
  if (!e) return null;
  if (e.status !== "ok") return `Estimate: unavailable — ${e.reason}.`;
  const rows = e.runtimes.flatMap((r) =>
    r.phases.map((p) => [r.runtime, p.phase, num(p.rss.estimateMiB), num(p.rss.measuredMiB), pctText(p.rss.errorPct),
      num(p.uss.estimateMiB), num(p.uss.measuredMiB), pctText(p.uss.errorPct), num(p.peak.estimateMiB), num(p.peak.measuredMiB), pctText(p.peak.errorPct)]),
  );
  const naive = e.naiveMiB === null ? [] : [
    "",
    `Naive formula (seeds/003: parameters × 4 B + a batch of inputs × 4 B): ${num(e.naiveMiB)} MiB for any runtime; ` +
      `against the measured steady RSS: ${e.runtimes.map((r) => {
        const m = r.phases.at(-1)?.rss.measuredMiB;
        return `${r.runtime} ${m ? pctText(((e.naiveMiB! - m) / m) * 100) : "—"}`;
      }).join(", ")}.`,
  ];
  const t = e.training;
  const training = t
    ? ["", `Training (${t.stage}, ${t.arch}): peak RSS ${num(t.estimateMiB)} MiB estimated, ${num(t.measuredMiB)} measured (${pctText(t.errorPct)}); ` +
      `naive formula ${num(t.naiveMiB)} MiB (${pctText(t.naiveErrorPct)}). Parts: ${t.parts}.`]
    : e.trainingReason ? ["", `Training estimate: unavailable — ${e.trainingReason}.`] : [];
  const distributed = (e.distributed ?? []).map((d) =>
    `Distributed (${d.stage}, ${d.arch}, ${d.strategy}, ${d.ranks} ranks here): peak RSS a rank ${num(d.perRankEstimateMiB)} MiB estimated, ` +
    `${num(d.perRankMeasuredMiB)} measured (highest rank, ${pctText(d.errorPct)}); launcher ${num(d.launcherEstimateMiB)} MiB estimated (not sampled). Parts: ${d.parts}.`);
  if (distributed.length > 0) training.push("", ...distributed);
  training.push(...deviceMarkdown(e.device ?? []));
  if (e.runtimes.length === 0) return [`ONNX runtimes: ${e.reason ?? "none ran"}.`, ...training].join("\n");
  return [
    `Calibrated on this machine at ${e.calibratedAt}; predicted from the ONNX graph before the run (\`memlane estimate\`), error = (estimate − measured) / measured.`,
    "",
    mdTable(["runtime", "phase", "est. RSS", "RSS", "err", "est. USS", "USS", "err", "est. peak", "peak", "err"], rows),
    ...naive,
    ...training,
  ].join("\n");
}

/** The device-memory checks (memlane-rt on CUDA): a table, or why a row has no estimate. */
function deviceMarkdown(checks: readonly DeviceEstimateCheck[]): string[] {
  if (checks.length === 0) return [];
  const rows = checks.map((d) => {
    const e = d.estimate;
    return [`${d.runtime} (${d.stage})`, String(d.maxBatch), e ? num(e.loadMiB) : "—", num(d.measured.loadMiB), pctText(d.loadErrorPct),
      num(d.measured.endMiB), pctText(d.endErrorPct), e ? num(e.peakMiB) : "—", num(d.measured.peakMiB), pctText(d.peakErrorPct),
      e ? `context ${num(e.parts.contextMiB)} + weights ${num(e.parts.weightsMiB)} + ${e.parts.contexts} × (${num(e.parts.perContextFixedMiB)} fixed + ${num(e.parts.perContextAllocationsMiB)} allocated)` : `unavailable: ${d.reason}`];
  });
  const cal = checks.find((d) => d.calibration)?.calibration;
  return ["", `Device memory (CUDA, this process's GPU MiB; docs/memory.md, "Device memory (CUDA)")${cal ? `, calibrated ${cal}` : ""}:`, "",
    mdTable(["runtime", "batch", "est. load", "after load", "err", "at the end", "err", "est. peak", "peak", "err", "parts"], rows)];
}

/** One line per runtime: steady RSS estimated vs measured. */
export function estimatesSummary(report: Report): string[] {
  const e = report.estimates;
  if (!e) return [];
  if (e.status !== "ok") return [`Estimate: unavailable — ${e.reason}`];
  return [
    "Estimate vs measured (steady RSS, calibrated on this machine):",
    ...e.runtimes.map((r) => {
      const last = r.phases.at(-1);
      return last ? `  ${r.runtime.padEnd(12)} ${num(last.rss.estimateMiB)} MiB estimated, ${num(last.rss.measuredMiB)} measured (${pctText(last.rss.errorPct)})` : `  ${r.runtime}: no common phase`;
    }),
    ...(e.naiveMiB !== null ? [`  naive formula: ${num(e.naiveMiB)} MiB for every runtime`] : []),
    ...(e.training ? [`  training peak ${num(e.training.estimateMiB)} MiB estimated, ${num(e.training.measuredMiB)} measured (${pctText(e.training.errorPct)}); naive ${num(e.training.naiveMiB)} MiB`] : []),
    ...(e.device ?? []).map((d) => d.estimate
      ? `  ${d.runtime.padEnd(12)} device ${num(d.estimate.loadMiB)} MiB estimated after the load, ${num(d.measured.loadMiB)} measured (${pctText(d.loadErrorPct)})`
      : `  ${d.runtime.padEnd(12)} device: not estimated (${d.reason})`),
    ...(e.distributed ?? []).map((d) => `  ${d.stage} (${d.strategy}) rank peak ${num(d.perRankEstimateMiB)} MiB estimated, ${num(d.perRankMeasuredMiB)} measured (${pctText(d.errorPct)})`),
  ];
}
