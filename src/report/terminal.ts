/**
 * The terminal summary printed at the end of a run: plain text, aligned columns, at most
 * `width` (120) columns. One row per runtime, then per-phase increments side by side, then
 * the native-over-Python ratios. `n/a` marks a figure that was not measured.
 */
import { anyPipelined, backendNotes, batchKeys, latency, num, pct, pipelinedThroughput, sci, signed, textTableFit } from "./format.ts";
import { steadyBreakdown } from "./breakdown.ts";
import { profileTerminal } from "./profile.ts";
import type { Report } from "./schema.ts";

const NA = "n/a";

export interface TerminalOptions {
  /** Maximum line width; default 120. */
  width?: number;
}

function runtimeTable(report: Report, width: number): string {
  const keys = batchKeys(report);
  // batch1 and batch64 when present, else the smallest and largest batch measured.
  const pick = [...new Set([keys.find((k) => k === "batch1") ?? keys[0], keys.find((k) => k === "batch64") ?? keys[keys.length - 1]])]
    .filter((k): k is `batch${number}` => k !== undefined);
  // Pipelined samples/s only when a runtime measured it (on CUDA): no all-"-" column on the CPU.
  // Headed "piped/s" so that the 120-column table still fits in one piece (explained under it).
  const pipelined = anyPipelined(report);
  const header = [
    "runtime", "RSS MiB", "USS MiB", ...pick.flatMap((b) => [`b${b.slice(5)} p50 ms`, `b${b.slice(5)} p99 ms`]), "samples/s",
    ...(pipelined ? ["piped/s"] : []), "accuracy", "max abs diff",
  ];
  const rows = report.runtimes.map((r) => [
    r.name.slice(0, 16), num(r.steady.rssMiB, 2, NA), num(r.steady.ussMiB, 2, NA),
    ...pick.flatMap((b) => [latency(r.latencyMs, b, "p50", NA), latency(r.latencyMs, b, "p99", NA)]),
    num(r.throughputPerS, 0, NA), ...(pipelined ? [num(pipelinedThroughput(r), 0, "-")] : []),
    pct(r.accuracy, NA), r.name === report.numerics.reference ? "reference" : sci(r.maxAbsDiff, NA),
  ]);
  // A runtime that did not run keeps its row; the reason follows the table (notRunLines).
  for (const u of report.runtimesNotRun ?? []) rows.push([u.name.slice(0, 16), u.status, ...header.slice(2).map(() => "-")]);
  return textTableFit(header, rows, width);
}

/** "Backend notes:" and one `name: notes` entry per runtime that has some, wrapped to `width`; null when none. */
function notesBlock(report: Report, width: number): string | null {
  const notes = backendNotes(report);
  if (notes.length === 0) return null;
  const out = ["Backend notes:"];
  for (const [name, text] of notes) {
    let line = `  ${name}:`;
    let fresh = false; // a continuation line with no word yet
    for (const word of text.split(/\s+/).filter(Boolean)) {
      if (!fresh && line.length + 1 + word.length > width) {
        out.push(line);
        line = "    ";
        fresh = true;
      }
      line += fresh ? word : ` ${word}`;
      fresh = false;
    }
    out.push(line);
  }
  return out.map((l) => l.slice(0, width)).join("\n");
}

/** Δ RSS / Δ USS per phase, runtimes as columns; split into several tables to fit the width. */
function phaseTable(report: Report, width: number): string {
  const c = report.comparison;
  const names = report.runtimes.map((r) => r.name);
  const rows = c.phases.map((p) => [
    p.phase,
    ...names.map((n) => {
      const f = p.byRuntime[n];
      return f ? `${signed(f.deltaRssMiB, 2, NA)} / ${signed(f.deltaUssMiB, 2, NA)}` : "-";
    }),
  ]);
  return textTableFit(["phase", ...names], rows, width);
}

/** The top 3 kinds of mapping per runtime at the steady state; null when no runtime sent a breakdown. */
function kindsTable(report: Report, width: number): string | null {
  const rows = report.runtimes.flatMap((r) => {
    const b = steadyBreakdown(r);
    if (!b) return [];
    const top = b.kinds.slice(0, 3).map((k) => `${k.label} ${num(k.rssMiB, 1)} (${num(k.ussMiB, 1)})`);
    return [[r.name.slice(0, 16), num(b.totalRssMiB, 2, NA), ...top, ...Array(3 - top.length).fill("")]];
  });
  if (rows.length === 0) return null;
  // Left-aligned kind cells read better than the numeric right alignment of textTable.
  const widths = [0, 1, 2, 3, 4].map((i) => Math.max(...[["runtime", "RSS MiB", "1st", "2nd", "3rd"], ...rows].map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === 1 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ").trimEnd().slice(0, width);
  return [line(["runtime", "RSS MiB", "1st", "2nd", "3rd"]), widths.map((w) => "-".repeat(w)).join("  ").slice(0, width), ...rows.map(line)].join("\n");
}

function ratioTable(report: Report, width: number): string | null {
  const rs = report.comparison.ratios;
  if (rs.length === 0) return null;
  const pairs = [...new Set(rs.map((r) => `${r.numerator}\u0000${r.denominator}`))];
  const counters = [
    ["steady.rssMiB", "RSS"], ["steady.ussMiB", "USS"], ["steady.pssMiB", "PSS"],
    ["latencyMs.batch1.p50", "b1 p50"], ["throughputPerS", "samples/s"],
  ] as const;
  const rows = pairs.map((pair) => {
    const [n, d] = pair.split("\u0000") as [string, string];
    return [`${n} / ${d}`, ...counters.map(([k]) => num(rs.find((r) => r.numerator === n && r.denominator === d && r.counter === k)?.value, 3, NA))];
  });
  return textTableFit(["ratio (steady, x)", ...counters.map(([, label]) => label)], rows, width);
}

/** One line per runtime that did not run: `name: unavailable — reason` / `name: failed — CODE: message`. */
export function notRunLines(report: Report): string[] {
  return (report.runtimesNotRun ?? []).map((u) =>
    u.status === "failed" ? `${u.name}: failed — ${u.error.name}: ${u.error.message}` : `${u.name}: unavailable — ${u.error.message}`);
}

/**
 * Max abs diff per output, runtimes as columns; only when some runtime ran a model with
 * several outputs (one output: the runtime table's column says it all).
 */
function outputTable(report: Report, width: number): string | null {
  const ran = report.runtimes.filter((r) => r.outputs && r.outputs.length > 1);
  if (ran.length === 0) return null;
  const names = [...new Set(ran.flatMap((r) => r.outputs!.map((o) => o.name)))];
  const rows = names.map((n) => [n.length > 32 ? `${n.slice(0, 31)}…` : n, ...ran.map((r) => {
    if (r.name === report.numerics.reference) return "reference";
    const o = r.outputs!.find((x) => x.name === n);
    return o ? sci(o.maxAbsDiff, NA) : "-";
  })]);
  return textTableFit(["output", ...ran.map((r) => r.name)], rows, width);
}

export function renderTerminal(report: Report, options: TerminalOptions = {}): string {
  const width = options.width ?? 120;
  const gpu = report.gpu.status === "available" ? "GPU available" : `GPU unavailable${report.gpu.reason ? `: ${report.gpu.reason}` : ""}`;
  const out = [`memlane ${report.pipeline}  run ${report.runId}  ${gpu}`.slice(0, width), ""];
  const notRun = notRunLines(report);
  if (report.runtimes.length === 0) {
    out.push("No runtime completed.", ...notRun);
  } else {
    out.push("Per runtime, steady state (end of steady-inference):", runtimeTable(report, width));
    if (notRun.length > 0) out.push(...notRun);
    if (report.inputs?.length)
      out.push("", "Inputs fed to every runtime (N: the batch):",
        ...report.inputs.map((i) => `  ${i.name} ${i.dtype} [${i.shape.map((d) => (d < 0 ? "N" : String(d))).join(", ")}]: ${i.values}`));
    const perOutput = outputTable(report, width);
    if (perOutput) out.push("", `Max abs diff per output vs ${report.numerics.reference ?? "the reference"}:`, perOutput);
    if (anyPipelined(report)) out.push("piped/s: samples/s, requests sent back to back, then drained; - not timed so".slice(0, width));
    const notes = notesBlock(report, width);
    if (notes) out.push("", notes);
    out.push("", "Per phase and process, delta RSS / delta USS MiB (end - start):");
    out.push(phaseTable(report, width), "");
    const kinds = kindsTable(report, width);
    if (kinds) out.push("Where the RAM goes at steady state, top 3 kinds of mapping by RSS MiB (USS):", kinds, "");
    const ratios = ratioTable(report, width);
    if (ratios) out.push("Native / Python (memory, latency: < 1 is less; samples/s: > 1 is faster):", ratios, "");
    const prof = profileTerminal(report.runtimes, width);
    if (prof) out.push("Per-op profile (calls of their own after the timed ones; ms per call, % of the runtime's ops):", prof, "");
  }
  const text = out.join("\n").trimEnd();
  return `${text}${/\bn\/a\b/.test(text) ? "\n\nn/a: not measured." : ""}\n`;
}
