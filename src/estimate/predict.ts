/**
 * Estimates from a calibration, and estimate-vs-measured against a report. Also the naive
 * formula of seeds/003 (parameters × 4 bytes + input size × 4 bytes), shown beside ours as a
 * baseline: it ignores the runtime, the eval set and every fixed cost, and the error column
 * says how much that matters.
 */
import type { RuntimeReport } from "../report/schema.ts";
import type { Calibration, Counter } from "./calibration.ts";
import { COUNTERS } from "./calibration.ts";
import { predict } from "./fit.ts";
import type { Features, ModelTerms, RunShape } from "./model-terms.ts";

/**
 * `spreadMiB`: the end-RSS fit's rms residual over the calibration probes: how far this
 * runtime's measurements scatter around any line through them. node-ort's is its orchestrator's
 * heap (V8 collects when it collects: ~6 to 17 MiB); python-ort's and memlane-rt's are a few MiB
 * or less. An estimate is no closer than that. Absent where no probes were fitted (python-torch).
 */
export type PhaseEstimate = { phase: string; spreadMiB?: number } & Record<Counter, number>;

export interface RuntimeEstimate {
  runtime: string;
  features: Features;
  phases: PhaseEstimate[];
}

/** null when the calibration has no model for this runtime. */
export function estimateRuntime(c: Calibration, runtime: string, f: Features): RuntimeEstimate | null {
  const m = c.models[runtime];
  if (!m) return null;
  const phases = m.phases.map((phase) => {
    const fits = m.fits[phase]!;
    const row = { phase, spreadMiB: fits.rss.rmsMiB } as PhaseEstimate;
    for (const k of Object.keys(COUNTERS) as Counter[]) row[k] = Math.max(0, predict(fits[k], f));
    // Separate fits can put a phase's peak a hair under its end RSS; a peak never is.
    row.peak = Math.max(row.peak, row.rss);
    return row;
  });
  return { runtime, features: f, phases };
}

/** seeds/003: parameters × 4 B + one batch of inputs × 4 B, in MiB. */
export function naiveMiB(t: ModelTerms, run: RunShape): number {
  const inputPerSample = t.ioPerSampleMiB ?? 0;
  return (t.params * 4) / 2 ** 20 + inputPerSample * run.maxBatch;
}

export interface CounterCheck {
  estimateMiB: number;
  measuredMiB: number;
  /** (estimate - measured) / measured × 100. */
  errorPct: number;
}

export interface PhaseCheck {
  phase: string;
  rss: CounterCheck;
  uss: CounterCheck;
  pss: CounterCheck;
  peak: CounterCheck;
}

const check = (estimateMiB: number, measuredMiB: number): CounterCheck => ({
  estimateMiB, measuredMiB, errorPct: measuredMiB > 0 ? ((estimateMiB - measuredMiB) / measuredMiB) * 100 : 0,
});

/** Estimate vs measured for every phase both have. */
export function compareWithMeasured(e: RuntimeEstimate, r: RuntimeReport): PhaseCheck[] {
  const out: PhaseCheck[] = [];
  for (const p of e.phases) {
    const m = r.phases.find((x) => x.name === p.phase);
    if (!m) continue;
    out.push({ phase: p.phase, rss: check(p.rss, m.rssMiB), uss: check(p.uss, m.ussMiB), pss: check(p.pss, m.pssMiB), peak: check(p.peak, m.peakRssMiB) });
  }
  return out;
}

/** What the load probe's terms (Features.loadMiB, loadTransientMiB) are for a runtime, in words. */
export function loadWords(runtime: string): { resident: string; transient: string } {
  return runtime === "native"
    ? { resident: "repacked at load", transient: "originals held while repacked" }
    : { resident: "in use after the load", transient: "freed during the load above its end" };
}

/** The highest predicted peak over the phases, and what it is made of (for a refused stage's message). */
export function predictedPeak(c: Calibration, runtime: string, f: Features): { peakMiB: number; parts: string } | null {
  const m = c.models[runtime];
  if (!m || m.phases.length === 0) return null;
  let best: { phase: string; v: number } | null = null;
  for (const phase of m.phases) {
    const v = predict(m.fits[phase]!.peak, f);
    if (!best || v > best.v) best = { phase, v };
  }
  const [c0, cw, ccw, ca, ce, co, ch, cu, cl, cr, cd, cb, cws, cf, ct, , cfr, cm, cs] = m.fits[best!.phase]!.peak.coef;
  const mib = (x: number) => `${x.toFixed(1)} MiB`;
  const parts = `${runtime} ${best!.phase}: fixed ${mib(c0)} + weights ${mib(cw * f.weightMiB + ccw * f.convWeightMiB)} + activations ${mib(ca * f.activationMiB)} + eval set ${mib(ce * f.evalMiB + co * f.evalOutputMiB)}` +
    (ch * f.heldMiB > 0 ? ` + held by malloc after the load ${mib(ch * f.heldMiB)}` : "") +
    ((cu ?? 0) * f.largestBatchMiB > 0 ? ` + the largest batch beyond one sample ${mib((cu ?? 0) * f.largestBatchMiB)}` : "") +
    ((cl ?? 0) * f.loadMiB > 0 ? ` + ${loadWords(runtime).resident} ${mib((cl ?? 0) * f.loadMiB)}` : "") +
    ((cr ?? 0) * f.nativeReleasedMiB < 0 ? ` − plan pages given back ${mib(-(cr ?? 0) * f.nativeReleasedMiB)}` : "") +
    ((cd ?? 0) * f.deadOutputMiB > 0 ? ` + dead outputs or eval chunks not yet collected ${mib((cd ?? 0) * f.deadOutputMiB)}` : "") +
    ((cb ?? 0) * f.outputBufferMiB > 0 ? ` + output buffers ${mib((cb ?? 0) * f.outputBufferMiB)}` : "") +
    ((cws ?? 0) * f.nativeWorkspaceMiB > 0 ? ` + kernel workspace ${mib((cws ?? 0) * f.nativeWorkspaceMiB)}` : "") +
    ((cf ?? 0) * f.ortFirstRequestMiB > 0 ? ` + ORT's arena after its first request ${mib((cf ?? 0) * f.ortFirstRequestMiB)}` : "") +
    ((cfr ?? 0) * f.firstRequestMiB > 0 ? ` + what the first request holds ${mib((cfr ?? 0) * f.firstRequestMiB)}` : "") +
    ((cm ?? 0) * f.mappedWeightMiB > 0 ? ` + weights read in place ${mib((cm ?? 0) * f.mappedWeightMiB)}` : "") +
    ((cs ?? 0) * f.socketEvalMiB > 0 ? ` + eval set in the task's message ${mib((cs ?? 0) * f.socketEvalMiB)}` : "") +
    ((ct ?? 0) * f.loadTransientMiB > 0 ? ` + ${loadWords(runtime).transient} ${mib((ct ?? 0) * f.loadTransientMiB)}` : "");
  return { peakMiB: Math.max(0, best!.v), parts };
}
