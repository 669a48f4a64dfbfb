/** The benchmark stage's `profile` option (docs/profiling.md): checked once, then resolved against the stage's batches. */
import { checkInt, OptionError } from "./options.ts";
import type { BenchmarkOptions } from "./stages.ts";

/** Profiled calls a stage may ask for (memlane-rt refuses more: native/runtime/src/rt/task_profile.cc). */
export const MAX_PROFILE_ITERATIONS = 100_000;

export function checkProfile(stage: string, opts: BenchmarkOptions): void {
  const p = opts.profile;
  if (p === undefined || typeof p === "boolean") return;
  if (p === null || typeof p !== "object" || Array.isArray(p)) throw new OptionError(`stage "${stage}": profile`, "a boolean or { batch?, iterations? }", p);
  for (const k of Object.keys(p))
    if (k !== "batch" && k !== "iterations") throw new OptionError(`stage "${stage}": profile.${k}`, "batch or iterations", k);
  if (p.batch !== undefined) {
    checkInt(`stage "${stage}": profile.batch`, p.batch, 1);
    if (opts.batchSizes && !opts.batchSizes.includes(p.batch)) throw new OptionError(`stage "${stage}": profile.batch`, `one of batchSizes (${opts.batchSizes.join(", ")})`, p.batch);
  }
  if (p.iterations !== undefined) {
    checkInt(`stage "${stage}": profile.iterations`, p.iterations, 1);
    if (p.iterations > MAX_PROFILE_ITERATIONS) throw new OptionError(`stage "${stage}": profile.iterations`, `an integer <= ${MAX_PROFILE_ITERATIONS}`, p.iterations);
  }
}

/** The batch and call count to profile, or null when the stage does not profile. */
export function resolveProfile(opts: BenchmarkOptions, batchSizes: readonly number[], iterations: number, stage: string): { batch: number; iterations: number } | null {
  const p = opts.profile;
  if (!p) return null;
  const o = p === true ? {} : p;
  const batch = o.batch ?? batchSizes[0]!;
  if (!batchSizes.includes(batch)) throw new OptionError(`stage "${stage}": profile.batch`, `one of the stage's batch sizes (${batchSizes.join(", ")})`, batch);
  return { batch, iterations: o.iterations ?? iterations };
}
