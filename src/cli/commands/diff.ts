/**
 * `memlane diff <runA> <runB>`: per-runtime, per-phase memory deltas (end RSS, USS, peak,
 * the phase's own increment) and p50 latency deltas, B minus A, so a memory regression
 * shows in review. Always exits 0 on two readable reports (it reports; `check` gates).
 */
import { type CommandSpec, parseArgs, usage } from "../args.ts";
import type { Io } from "../io.ts";
import { diffReports, type FigureDelta } from "../../report/diff.ts";
import { textTable } from "../../report/format.ts";
import { loadReport } from "../../report/load.ts";

export const spec: CommandSpec = {
  name: "diff",
  summary: "Per-runtime, per-phase memory and latency deltas between two runs (B - A).",
  positionals: [
    { name: "runA", description: "the baseline run directory or report.json" },
    { name: "runB", description: "the run to compare with it" },
  ],
  flags: {},
};

/** "+1.23 (+4.5 %)", "-0.50 (-2.0 %)", "unavailable". */
export function fmtDelta(d: FigureDelta, digits = 2): string {
  if (d.delta === null) return d.a === null && d.b === null ? "unavailable" : `${d.a ?? "-"} → ${d.b ?? "-"}`;
  const sign = d.delta > 0 ? "+" : "";
  const rel = d.relative === null ? "" : ` (${d.relative > 0 ? "+" : ""}${(d.relative * 100).toFixed(1)} %)`;
  return `${sign}${d.delta.toFixed(digits)}${rel}`;
}

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const args = parseArgs(spec, argv);
  if (args.help) {
    io.out(usage(spec));
    return 0;
  }
  let a, b;
  try {
    a = await loadReport(args.positionals.runA!);
    b = await loadReport(args.positionals.runB!);
  } catch (err) {
    io.err(`memlane diff: ${(err as Error).message}`);
    return 1;
  }
  io.out(`memlane diff: A = ${a.report.pipeline} ${a.report.runId}, B = ${b.report.pipeline} ${b.report.runId} (B - A; MiB, ms)`);
  for (const r of diffReports(a.report, b.report)) {
    io.out("");
    if (r.presence !== "both") {
      io.out(`${r.runtime}: in ${r.presence === "a only" ? "A" : "B"} only`);
      continue;
    }
    io.out(`${r.runtime}:`);
    const rows = r.phases.map((p) => [p.phase, fmtDelta(p.rssMiB), fmtDelta(p.ussMiB), fmtDelta(p.peakRssMiB), fmtDelta(p.deltaRssMiB), fmtDelta(p.ms, 1)]);
    if (r.steady.rssMiB.delta !== null) rows.push(["steady", fmtDelta(r.steady.rssMiB), fmtDelta(r.steady.ussMiB), "", "", ""]);
    io.out(textTable(["phase", "end RSS", "end USS", "peak RSS", "phase Δ RSS", "ms"], rows));
    for (const [key, d] of Object.entries(r.p50Ms)) io.out(`  ${key} p50 ms: ${d.a?.toFixed(3)} → ${d.b?.toFixed(3)} (${fmtDelta(d, 3)})`);
    for (const side of ["a", "b"] as const)
      if (r.phasesOnlyIn[side].length) io.out(`  phases only in ${side.toUpperCase()}: ${r.phasesOnlyIn[side].join(", ")}`);
  }
  return 0;
}
