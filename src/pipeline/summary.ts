/**
 * What the run adds below the report's terminal table: training and checkpoint loading
 * (which that table leaves to report.md), the native plan's arena, the
 * node-ort process note, and the lines python stages logged.
 */
import { estimatesSummary } from "../report/estimates.ts";
import { distributedSummary } from "../report/distributed.ts";
import { num, textTable } from "../report/format.ts";
import type { Report } from "../report/schema.ts";
import type { RunSession } from "./session.ts";

export function runSummary(report: Report, s: RunSession): string[] {
  const out: string[] = [];
  const t = report.training;
  if (t) {
    const peak = Math.max(...t.phases.map((p) => p.peakRssMiB));
    out.push(
      `Training (pid ${t.pid}, ${t.device}): held-out accuracy ${(t.accuracy * 100).toFixed(2)} % after ${t.epochs} epochs, peak RSS ${num(peak, 1)} MiB`,
      "",
    );
  }
  out.push(...distributedSummary(report));
  if (report.checkpointLoad.length > 0) {
    const arch = report.checkpointLoad[0]!.arch;
    out.push(`Checkpoint load${arch ? ` (${arch})` : ""}, each method in a fresh worker; model-load = build + load, peak Δ = peak − start;`);
    out.push("then one forward pass (1st inf.), where mapped weights are read in:");
    out.push(
      textTable(
        ["method", "pid", "file MiB", "Δ RSS MiB", "Δ USS MiB", "peak RSS MiB", "peak Δ MiB", "ms", "1st inf. Δ RSS"],
        report.checkpointLoad.map((c) => [
          c.method, String(c.pid), num(c.fileMiB, 2), num(c.deltaRssMiB, 2), num(c.deltaUssMiB, 2), num(c.peakRssMiB, 1),
          c.peakDeltaRssMiB === undefined ? "—" : num(c.peakDeltaRssMiB, 2), num(c.ms, 1),
          c.firstInferenceDeltaRssMiB == null ? "—" : num(c.firstInferenceDeltaRssMiB, 2),
        ]),
      ),
      "",
    );
  }
  for (const b of s.benchmarks.values())
    if (b.plan)
      out.push(`${b.runtime} plan: arena ${b.plan.arenaBytesPerSample} B/sample vs lower bound ${b.plan.lowerBoundPerSample} B/sample`);
  const notes = report.notes ?? s.notes; // the report's: concurrent runs, retries, then the session's
  if (notes.length > 0) out.push("", ...notes);
  const est = estimatesSummary(report);
  if (est.length) out.push("", ...est);
  if (report.budgets?.length) out.push("", "Budgets:", ...report.budgets.map((b) => `  ${b.status === "ok" ? "ok      " : b.status === "exceeded" ? "EXCEEDED" : "UNCHECKED"} ${b.message}`));
  return out;
}
