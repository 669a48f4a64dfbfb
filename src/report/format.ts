/** Cell formatting and table layout shared by the markdown and terminal renderers. */
import type { LatencyTable, Report, RuntimeReport } from "./schema.ts";

export const UNAVAILABLE = "unavailable";

/** A number with fixed digits, or `unavailable` when it was not measured. */
export function num(x: number | null | undefined, digits = 2, unknown = UNAVAILABLE): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return unknown;
  return x.toFixed(digits);
}

/** A signed increment: +12.3 / -4.0 / 0.0. */
export function signed(x: number | null | undefined, digits = 2, unknown = UNAVAILABLE): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return unknown;
  const s = x.toFixed(digits);
  if (Number(s) === 0) return (0).toFixed(digits);
  return x > 0 ? `+${s}` : s;
}

/** A small float like a max abs diff: exponent notation below 0.001. */
export function sci(x: number | null | undefined, unknown = UNAVAILABLE): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return unknown;
  if (x === 0) return "0";
  return Math.abs(x) < 1e-3 ? x.toExponential(2) : x.toFixed(4);
}

export const pct = (x: number | null | undefined, unknown = UNAVAILABLE): string =>
  x === null || x === undefined || !Number.isFinite(x) ? unknown : `${(x * 100).toFixed(2)} %`;

/** `batch<N>` keys present in any runtime, sorted by N. */
export function batchKeys(report: Report): Array<`batch${number}`> {
  const keys = new Set<string>();
  for (const r of report.runtimes) for (const k of Object.keys(r.latencyMs)) keys.add(k);
  return [...keys]
    .filter((k): k is `batch${number}` => /^batch\d+$/.test(k))
    .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
}

export const latency = (t: LatencyTable, key: `batch${number}`, stat: "p50" | "p99" | "mean" | "pipelinedMean", unknown = UNAVAILABLE) =>
  num(t[key]?.[stat], 3, unknown);

/** A markdown table; cells are escaped for `|`. Numeric-looking columns align right. */
export function mdTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const esc = (c: string) => c.replace(/\r?\n/g, " ").replace(/\|/g, "\\|");
  const right = header.map((_, i) => i > 0 && rows.every((r) => /^[-+]?[\d.e+-]+( %)?$|^unavailable$|^—$/.test(r[i] ?? "")));
  const lines = [
    `| ${header.map(esc).join(" | ")} |`,
    `| ${header.map((_, i) => (right[i] ? "---:" : "---")).join(" | ")} |`,
    ...rows.map((r) => `| ${r.map(esc).join(" | ")} |`),
  ];
  return lines.join("\n");
}

/** A plain-text table: columns padded to their widest cell, first column left, others right. */
export function textTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>, gap = 2): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join(" ".repeat(gap))
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join(" ".repeat(gap));
  return [line(header), rule, ...rows.map(line)].join("\n");
}

/**
 * textTable within `width` columns: when too wide, the columns after the first are split into
 * several tables (each repeating the first column), separated by a blank line.
 */
export function textTableFit(header: readonly string[], rows: ReadonlyArray<readonly string[]>, width: number, gap = 2): string {
  const colWidth = (i: number) => Math.max((header[i] ?? "").length, ...rows.map((r) => (r[i] ?? "").length));
  const groups: number[][] = [];
  let group: number[] = [];
  let used = colWidth(0);
  for (let i = 1; i < header.length; i++) {
    const w = colWidth(i) + gap;
    if (group.length > 0 && used + w > width) {
      groups.push(group);
      group = [];
      used = colWidth(0);
    }
    group.push(i);
    used += w;
  }
  if (group.length > 0 || groups.length === 0) groups.push(group);
  const pick = (r: readonly string[], g: number[]) => [r[0] ?? "", ...g.map((i) => r[i] ?? "")];
  return groups.map((g) => textTable(pick(header, g), rows.map((r) => pick(r, g)), gap)).join("\n\n");
}

/**
 * Pipelined samples/s of a runtime (null when not measured; absent in reports written before
 * the field existed).
 */
export const pipelinedThroughput = (r: RuntimeReport): number | null => r.pipelinedThroughputPerS ?? null;

/** Whether any runtime measured pipelined samples/s: only then does a report show that column. */
export const anyPipelined = (report: Report): boolean => report.runtimes.some((r) => pipelinedThroughput(r) !== null);

/** `batch<N>` keys for which any runtime has a pipelined mean, sorted by N. */
export const pipelinedBatchKeys = (report: Report): Array<`batch${number}`> =>
  batchKeys(report).filter((k) => report.runtimes.some((r) => typeof r.latencyMs[k]?.pipelinedMean === "number"));

/** [runtime, notes] for each runtime whose backend said what it did with its switches. */
export const backendNotes = (report: Report): Array<[runtime: string, notes: string]> =>
  report.runtimes.flatMap((r) => (r.backendNotes ? [[r.name, r.backendNotes] as [string, string]] : []));
