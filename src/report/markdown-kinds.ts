/**
 * report.md's "where the RAM goes": per phase what grew by kind of mapping, the steady-state
 * breakdown of a process as a table, and the runtimes' steady-state breakdowns side by side.
 */
import { fileName, growthLine, steadyBreakdown } from "./breakdown.ts";
import { mdTable, num, signed } from "./format.ts";
import type { MemoryBreakdown, PhaseReport, Report, RuntimeReport } from "./schema.ts";

/** Per phase, what grew by kind of mapping: one line a phase ("" when no phase has a breakdown). */
export function growthLines(pid: number, phases: readonly PhaseReport[]): string {
  const lines = phases.map((p) => growthLine(p)).filter((l): l is string => l !== null);
  if (lines.length === 0) return "";
  return [
    `Where the RAM goes, per phase (process pid ${pid}'s /proc/self/smaps at each phase end, grouped by kind; Δ RSS MiB over the phase, biggest first):`,
    "",
    ...lines.map((l) => `- ${l}`),
  ].join("\n");
}

/** One breakdown as a table: kind, RSS/PSS/USS/private dirty, Δ RSS over its phase, the biggest files. */
export function breakdownTable(b: MemoryBreakdown): string {
  return mdTable(
    ["kind", "RSS MiB", "PSS MiB", "USS MiB", "private dirty MiB", "Δ RSS MiB", "biggest files (RSS MiB)"],
    b.kinds.map((k) => [
      k.label, num(k.rssMiB), num(k.pssMiB), num(k.ussMiB), num(k.privateDirtyMiB), signed(k.deltaRssMiB),
      k.files.slice(0, 4).map((f) => `${fileName(f.path)} ${num(f.rssMiB)}`).join(", "),
    ]),
  );
}

export function steadyBreakdownBlock(r: RuntimeReport): string {
  const b = steadyBreakdown(r);
  if (!b) return "";
  return [
    `At the steady state (by kind; totals RSS ${num(b.totalRssMiB)}, PSS ${num(b.totalPssMiB)}, USS ${num(b.totalUssMiB)} MiB, the same reading's smaps_rollup within 1 %):`,
    "",
    breakdownTable(b),
  ].join("\n");
}

/** The steady-state breakdowns side by side: a row per kind, RSS (USS) per runtime. */
export function steadyKindsSideBySide(report: Report): string {
  const withB = report.runtimes.map((r) => [r.name, steadyBreakdown(r)] as const).filter((x): x is readonly [string, MemoryBreakdown] => x[1] !== null);
  if (withB.length === 0) return "";
  const labels = new Map<string, { label: string; max: number }>();
  for (const [, b] of withB)
    for (const k of b.kinds) {
      const e = labels.get(k.kind);
      labels.set(k.kind, { label: k.label, max: Math.max(e?.max ?? 0, k.rssMiB) });
    }
  const kinds = [...labels.entries()].sort((a, b) => b[1].max - a[1].max);
  const rows = kinds.map(([id, { label }]) => [label, ...withB.map(([, b]) => {
    const k = b.kinds.find((x) => x.kind === id);
    return k ? `${num(k.rssMiB)} (${num(k.ussMiB)})` : "—";
  })]);
  rows.push(["total", ...withB.map(([, b]) => `${num(b.totalRssMiB)} (${num(b.totalUssMiB)})`)]);
  return [
    "#### Where the RAM goes at the steady state, by runtime: RSS (USS) MiB per kind of mapping",
    "",
    mdTable(["kind", ...withB.map(([n]) => n)], rows),
  ].join("\n");
}
