/**
 * Per-stage memory budgets: `.benchmark("native", { budget: { rssMiB: 10 } })` and
 * `.train({ ..., budget: { peakRssMiB: 600 } })`. Checked once the run's report exists, with
 * the same rules as `memlane check` (src/report/limits.ts): every phase of the stage's
 * process must stay within each ceiling. An exceeded budget fails the run (exit 1) after
 * the report is written, so the figures that broke it can be read.
 */
import type { LimitFigure, MemoryLimit } from "../report/limits.ts";
import { TRAINING } from "../report/limits.ts";
import { OptionError } from "./options.ts";
import type { StageDef } from "./stages.ts";

/** Ceilings in MiB for one stage's process; each optional. */
export interface MemoryBudget {
  rssMiB?: number;
  ussMiB?: number;
  pssMiB?: number;
  peakRssMiB?: number;
  gpuMiB?: number;
}

const BUDGET_FIGURES: Readonly<Record<keyof MemoryBudget, LimitFigure>> = Object.freeze({
  rssMiB: "rss",
  ussMiB: "uss",
  pssMiB: "pss",
  peakRssMiB: "peak",
  gpuMiB: "gpu",
});

/** Checks a stage's `budget` option at pipeline build time; errors name stage and key. */
export function checkBudget(stage: string, budget: unknown): void {
  if (budget === undefined) return;
  if (budget === null || typeof budget !== "object" || Array.isArray(budget))
    throw new OptionError(`stage "${stage}": budget`, `an object with any of ${Object.keys(BUDGET_FIGURES).join(", ")}`, budget);
  for (const [key, v] of Object.entries(budget)) {
    if (!(key in BUDGET_FIGURES)) throw new OptionError(`stage "${stage}": budget.${key}`, `one of ${Object.keys(BUDGET_FIGURES).join(", ")}`, key);
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw new OptionError(`stage "${stage}": budget.${key}`, "a positive number of MiB", v);
  }
}

/** The limits the pipeline's stages declare, named as report rows name their processes. */
export function budgetLimits(stages: readonly StageDef[]): MemoryLimit[] {
  const out: MemoryLimit[] = [];
  for (const d of stages) {
    if (d.kind !== "benchmark" && d.kind !== "train") continue;
    const budget = d.opts.budget;
    if (!budget) continue;
    const runtime = d.kind === "train" ? TRAINING : d.runtime;
    for (const [key, figure] of Object.entries(BUDGET_FIGURES) as Array<[keyof MemoryBudget, LimitFigure]>) {
      const v = budget[key];
      if (v !== undefined) out.push({ runtime, figure, limitMiB: v, source: `budget.${key} of stage "${d.name}"` });
    }
  }
  return out;
}
