/**
 * The comparison section: runtimes side by side (steady footprint, per-phase increments)
 * and every non-Python runtime over every Python runtime, per counter.
 */
import type { ComparisonPhaseRow, ComparisonRatio, ComparisonReport, RuntimeReport } from "./schema.ts";

/** Counters compared as ratios, and how to read each from a runtime. */
type Counter = readonly [name: string, get: (r: RuntimeReport) => number | null];
export const RATIO_COUNTERS: readonly Counter[] = Object.freeze<Counter[]>([
  ["steady.rssMiB", (r) => r.steady.rssMiB],
  ["steady.ussMiB", (r) => r.steady.ussMiB],
  ["steady.pssMiB", (r) => r.steady.pssMiB],
  ["latencyMs.batch1.p50", (r) => r.latencyMs.batch1?.p50 ?? null],
  ["throughputPerS", (r) => r.throughputPerS],
]);

export const isPythonRuntime = (r: RuntimeReport): boolean => r.process.kind === "python";

/** numerator / denominator rounded to 3 digits; null when unknown or the denominator is 0. */
export function ratio(num: number | null, den: number | null): number | null {
  if (num === null || den === null || !Number.isFinite(num) || !Number.isFinite(den) || den === 0) return null;
  return Math.round((num / den) * 1000) / 1000;
}

export function buildComparison(runtimes: readonly RuntimeReport[]): ComparisonReport {
  const phaseNames: string[] = [];
  for (const r of runtimes) for (const p of r.phases) if (!phaseNames.includes(p.name)) phaseNames.push(p.name);
  const phases: ComparisonPhaseRow[] = phaseNames.map((phase) => ({
    phase,
    byRuntime: Object.fromEntries(
      runtimes.map((r) => {
        const p = r.phases.find((x) => x.name === phase);
        return [r.name, p ? { deltaRssMiB: p.deltaRssMiB, deltaUssMiB: p.deltaUssMiB, peakRssMiB: p.peakRssMiB, ms: p.ms } : null];
      }),
    ),
  }));
  const ratios: ComparisonRatio[] = [];
  const pythons = runtimes.filter(isPythonRuntime);
  for (const native of runtimes.filter((r) => !isPythonRuntime(r)))
    for (const py of pythons)
      for (const [counter, get] of RATIO_COUNTERS)
        ratios.push({ counter, numerator: native.name, denominator: py.name, value: ratio(get(native), get(py)) });
  return {
    steady: runtimes.map((r) => ({ runtime: r.name, ...r.steady })),
    phases,
    ratios,
  };
}
