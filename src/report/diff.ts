/**
 * Per-runtime, per-phase differences between two reports (`memlane diff A B`): what a
 * change did to memory and latency, for review. Rows pair runtimes by name and phases by
 * name; a runtime or phase present on one side only is listed as such, never dropped.
 */
import type { LatencyTable, PhaseReport, Report, SteadyMemory } from "./schema.ts";

/** A process with phases: a runtime row, or the training stage (no steady state, no latency). */
interface Proc {
  name: string;
  phases: readonly PhaseReport[];
  steady: SteadyMemory | null;
  latencyMs: LatencyTable;
}

export interface FigureDelta {
  a: number | null;
  b: number | null;
  /** b - a; null when either side is unknown. */
  delta: number | null;
  /** (b - a) / a; null when a is 0 or unknown. */
  relative: number | null;
}

export interface PhaseDiff {
  phase: string;
  rssMiB: FigureDelta;
  ussMiB: FigureDelta;
  peakRssMiB: FigureDelta;
  deltaRssMiB: FigureDelta;
  gpuMiB: FigureDelta;
  ms: FigureDelta;
}

export interface RuntimeDiff {
  runtime: string;
  /** "both", or the one report it appears in. */
  presence: "both" | "a only" | "b only";
  phases: PhaseDiff[];
  /** Phases marked on one side only. */
  phasesOnlyIn: { a: string[]; b: string[] };
  steady: { rssMiB: FigureDelta; ussMiB: FigureDelta; pssMiB: FigureDelta };
  /** p50 latency per `batch<N>` present on both sides. */
  p50Ms: Record<string, FigureDelta>;
}

export function delta(a: number | null | undefined, b: number | null | undefined): FigureDelta {
  const x = a ?? null;
  const y = b ?? null;
  const d = x !== null && y !== null ? y - x : null;
  return { a: x, b: y, delta: d, relative: d !== null && x !== null && x !== 0 ? d / x : null };
}

function phaseDiff(p: PhaseReport, q: PhaseReport): PhaseDiff {
  return {
    phase: p.name,
    rssMiB: delta(p.rssMiB, q.rssMiB),
    ussMiB: delta(p.ussMiB, q.ussMiB),
    peakRssMiB: delta(p.peakRssMiB, q.peakRssMiB),
    deltaRssMiB: delta(p.deltaRssMiB, q.deltaRssMiB),
    gpuMiB: delta(p.gpuMiB, q.gpuMiB),
    ms: delta(p.ms, q.ms),
  };
}

function runtimeDiff(name: string, a: Proc | undefined, b: Proc | undefined): RuntimeDiff {
  const pa = a?.phases ?? [];
  const pb = b?.phases ?? [];
  const phases: PhaseDiff[] = [];
  for (const p of pa) {
    const q = pb.find((x) => x.name === p.name);
    if (q) phases.push(phaseDiff(p, q));
  }
  const p50Ms: Record<string, FigureDelta> = {};
  for (const key of Object.keys(a?.latencyMs ?? {}) as Array<`batch${number}`>) {
    const qa = a?.latencyMs[key];
    const qb = b?.latencyMs[key];
    if (qa && qb) p50Ms[key] = delta(qa.p50, qb.p50);
  }
  return {
    runtime: name,
    presence: a && b ? "both" : a ? "a only" : "b only",
    phases,
    phasesOnlyIn: { a: pa.filter((p) => !pb.some((q) => q.name === p.name)).map((p) => p.name), b: pb.filter((q) => !pa.some((p) => p.name === q.name)).map((q) => q.name) },
    steady: { rssMiB: delta(a?.steady?.rssMiB, b?.steady?.rssMiB), ussMiB: delta(a?.steady?.ussMiB, b?.steady?.ussMiB), pssMiB: delta(a?.steady?.pssMiB, b?.steady?.pssMiB) },
    p50Ms,
  };
}

/** Runtimes in A's order, then those only in B; the training stage first, as "training". */
export function diffReports(a: Report, b: Report): RuntimeDiff[] {
  const procs = (r: Report): Proc[] => [
    ...(r.training ? [{ name: "training", phases: r.training.phases, steady: null, latencyMs: {} }] : []),
    ...r.runtimes.map((x) => ({ name: x.name, phases: x.phases, steady: x.steady, latencyMs: x.latencyMs })),
  ];
  const pa = procs(a);
  const pb = procs(b);
  const names = [...pa.map((r) => r.name), ...pb.map((r) => r.name).filter((n) => !pa.some((r) => r.name === n))];
  return names.map((n) => runtimeDiff(n, pa.find((r) => r.name === n), pb.find((r) => r.name === n)));
}
