/**
 * Memory limits checked against a report: what `memlane check` and a pipeline's per-stage
 * `budget` gate on. A limit names a runtime (or `training`, or `*` for every runtime), a
 * figure and a ceiling in MiB; it holds when no phase of that process exceeds it. A failure
 * names the runtime, the phase where the figure was highest, the figure and the limit.
 */
import { formatMiB } from "../memory/size.ts";
import type { PhaseReport, Report } from "./schema.ts";

/** The figures a limit can bound, each read from every phase of the process. */
export const LIMIT_FIGURES = Object.freeze({
  rss: { label: "RSS at phase end", read: (p: PhaseReport) => p.rssMiB },
  uss: { label: "USS at phase end", read: (p: PhaseReport) => p.ussMiB },
  pss: { label: "PSS at phase end", read: (p: PhaseReport) => p.pssMiB },
  peak: { label: "peak RSS", read: (p: PhaseReport) => p.peakRssMiB },
  gpu: { label: "GPU memory at phase end", read: (p: PhaseReport) => p.gpuMiB },
});
export type LimitFigure = keyof typeof LIMIT_FIGURES;

/** The process a limit applies to by this name: a runtime row, or the training stage. */
export const TRAINING = "training";
export const EVERY_RUNTIME = "*";

export interface MemoryLimit {
  runtime: string;
  figure: LimitFigure;
  limitMiB: number;
  /** Where the limit was declared: `--max-rss`, `budget of stage "bench:native"`. */
  source: string;
}

export interface LimitCheck {
  runtime: string;
  figure: LimitFigure;
  limitMiB: number;
  source: string;
  /** ok: within; exceeded; unmeasured: the figure is null (no GPU) or the process did not run. */
  status: "ok" | "exceeded" | "unmeasured";
  /** Highest value of the figure over the process's phases, and the phase it was in. */
  worstMiB: number | null;
  phase: string | null;
  /** One line for people: what was checked and how it came out. */
  message: string;
}

function processes(report: Report, runtime: string): Array<{ name: string; phases: readonly PhaseReport[] }> {
  if (runtime === EVERY_RUNTIME) return report.runtimes.map((r) => ({ name: r.name, phases: r.phases }));
  if (runtime === TRAINING) return report.training ? [{ name: TRAINING, phases: report.training.phases }] : [];
  const row = report.runtimes.find((r) => r.name === runtime);
  return row ? [{ name: row.name, phases: row.phases }] : [];
}

function checkOne(name: string, phases: readonly PhaseReport[], limit: MemoryLimit): LimitCheck {
  const f = LIMIT_FIGURES[limit.figure];
  let worst: { v: number; phase: string } | null = null;
  for (const p of phases) {
    const v = f.read(p);
    if (v !== null && Number.isFinite(v) && (worst === null || v > worst.v)) worst = { v, phase: p.name };
  }
  const base = { runtime: name, figure: limit.figure, limitMiB: limit.limitMiB, source: limit.source };
  const lim = formatMiB(limit.limitMiB);
  if (worst === null)
    return { ...base, status: "unmeasured", worstMiB: null, phase: null, message: `${name}: ${f.label} not measured in any phase (limit ${lim}, ${limit.source})` };
  const exceeded = worst.v > limit.limitMiB;
  return {
    ...base,
    status: exceeded ? "exceeded" : "ok",
    worstMiB: worst.v,
    phase: worst.phase,
    message: `${name}: ${f.label} ${formatMiB(worst.v)} in phase ${worst.phase} ${exceeded ? ">" : "<="} limit ${lim} (${limit.source})`,
  };
}

/**
 * Every limit against the report. A limit on a runtime the report lacks is `unmeasured` with
 * a message naming the runtimes it has: a gate that silently passes on a typo is no gate.
 */
export function checkLimits(report: Report, limits: readonly MemoryLimit[]): LimitCheck[] {
  const out: LimitCheck[] = [];
  for (const limit of limits) {
    const procs = processes(report, limit.runtime);
    if (procs.length === 0) {
      const have = [...report.runtimes.map((r) => r.name), ...(report.training ? [TRAINING] : [])];
      out.push({
        runtime: limit.runtime, figure: limit.figure, limitMiB: limit.limitMiB, source: limit.source,
        status: "unmeasured", worstMiB: null, phase: null,
        message: `${limit.runtime}: not in this report (it has ${have.join(", ") || "no runtimes"}); ${limit.source} cannot be checked`,
      });
      continue;
    }
    for (const p of procs) out.push(checkOne(p.name, p.phases, limit));
  }
  return out;
}
