/**
 * Least squares for the calibrated estimate: a figure (end RSS of a phase, say) as
 * intercept + a·weights + b·conv weights + c·activations + d·eval inputs + e·eval outputs
 * + h·malloc-held at load + u·unchunked arena + the load probe's resident bytes + memlane-rt's
 * released weights + node-ort's dead outputs + memlane-rt's output buffers and kernel workspace +
 * ORT's arena after its first request + the load probe's peak above its end + node-ort's dead
 * outputs malloc keeps once collected + the first request + weights read in place + memlane-rt's
 * eval set in the task's message (h, u and the last eleven given, never fitted, and for the ORT runtimes a and b too: calibration.ts), fitted
 * over the probes' measurements.
 * Memory never shrinks as a model grows, so a negative slope is clamped to 0 and the rest
 * refitted (an active-set fit for non-negative slopes), and a small ridge keeps a term
 * the probes barely moved from taking a wild value.
 */
import type { Features } from "./model-terms.ts";

export const FEATURE_NAMES = ["weightMiB", "convWeightMiB", "activationMiB", "evalMiB", "evalOutputMiB", "heldMiB", "largestBatchMiB", "loadMiB", "nativeReleasedMiB", "deadOutputMiB", "outputBufferMiB", "nativeWorkspaceMiB", "ortFirstRequestMiB", "loadTransientMiB", "deadOutputKeptMiB", "firstRequestMiB", "mappedWeightMiB", "socketEvalMiB"] as const satisfies ReadonlyArray<keyof Features>;

/**
 * [intercept, weights, conv weights, activations, eval inputs, eval outputs, malloc-held at load,
 * memlane-rt's unchunked arena, the load probe's resident bytes, memlane-rt's released weights, node-ort's dead
 * outputs, memlane-rt's output buffers, memlane-rt's kernel workspace, ORT's arena after its first request, the load probe's peak above its end, node-ort's dead outputs malloc keeps, the first request beyond one sample (memlane-rt, node-ort), weights read in place, memlane-rt's eval set in the task's message] in MiB per MiB
 * (the intercept in MiB). Calibrations of an older format have fewer and are redone.
 */
export type Coefficients = [number, number, number, number, number, number, number, number, number, number, number, number, number, number, number, number, number, number, number];

export interface Fit {
  coef: Coefficients;
  /** Root-mean-square residual over the probes, MiB. */
  rmsMiB: number;
}

const RIDGE = 1e-6;

function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[p]![c]!)) p = r;
    [m[c], m[p]] = [m[p]!, m[c]!];
    const d = m[c]![c]!;
    if (Math.abs(d) < 1e-12) continue;
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = m[r]![c]! / d;
      for (let k = c; k <= n; k++) m[r]![k]! -= f * m[c]![k]!;
    }
  }
  return m.map((row, i) => (Math.abs(row[i]!) < 1e-12 ? 0 : row[n]! / row[i]!));
}

function leastSquares(x: number[][], y: number[], active: boolean[]): number[] {
  const cols = active.flatMap((on, j) => (on ? [j] : []));
  const ata = cols.map((j) => cols.map((k) => x.reduce((s, row) => s + row[j]! * row[k]!, 0) + (j === k && j > 0 ? RIDGE : 0)));
  const aty = cols.map((j) => x.reduce((s, row, i) => s + row[j]! * y[i]!, 0));
  const sol = solve(ata, aty);
  const out = new Array<number>(active.length).fill(0);
  cols.forEach((j, i) => (out[j] = sol[i]!));
  return out;
}

/**
 * `fixed`: slopes known from elsewhere (ORT's arena replay is resident bytes: slope 1 where it
 * is resident, calibration.ts); they are taken as given and the rest fitted to what they leave.
 */
export function fitLinear(samples: ReadonlyArray<{ features: Features; value: number }>, fixed: Partial<Record<(typeof FEATURE_NAMES)[number], number>> = {}): Fit {
  if (samples.length === 0) throw new Error("fitLinear: no samples");
  const x = samples.map((s) => [1, ...FEATURE_NAMES.map((f) => s.features[f])]);
  const given = [0, ...FEATURE_NAMES.map((f) => fixed[f] ?? 0)];
  const y = samples.map((s, i) => s.value - x[i]!.reduce((a, v, j) => a + v * given[j]!, 0));
  const active = [true, ...FEATURE_NAMES.map((f) => fixed[f] === undefined)];
  let coef = leastSquares(x, y, active);
  for (let guard = 0; guard < 3 && coef.slice(1).some((c) => c < 0); guard++) {
    coef.forEach((c, j) => {
      if (j > 0 && c < 0) active[j] = false;
    });
    coef = leastSquares(x, y, active);
  }
  coef = coef.map((c, j) => c + given[j]!);
  const rms = Math.sqrt(x.reduce((s, row, i) => s + (predictWith(coef as Coefficients, row) - samples[i]!.value) ** 2, 0) / x.length);
  return { coef: coef as Coefficients, rmsMiB: rms };
}

function predictWith(coef: Coefficients, row: number[]): number {
  return coef.reduce((s, c, j) => s + c * row[j]!, 0);
}

export function predict(fit: Fit, f: Features): number {
  return predictWith(fit.coef, [1, ...FEATURE_NAMES.map((n) => f[n])]);
}
