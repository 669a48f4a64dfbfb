/**
 * Accuracy (argmax vs held-out labels) and max abs diff against the reference runtime's
 * outputs (python-torch, else ONNX Runtime: python-ort, then node-ort), computed here for every runtime alike.
 */
import { accuracy, maxAbsDiffAny } from "./metrics.ts";
import type { RunSession } from "./session.ts";
import type { BenchmarkResult } from "./stages.ts";

export const REFERENCE_ORDER = ["python-torch", "python-ort", "node-ort"] as const;

export function referenceRuntime(s: RunSession): string | null {
  return REFERENCE_ORDER.find((r) => s.benchmarks.has(r)) ?? null;
}

/**
 * Every output of `b` against the same output of `ref`: diff by output name (null where the
 * reference lacks it or the sizes differ: a note says which), and the worst of them.
 */
function diffs(b: BenchmarkResult, ref: BenchmarkResult, notes: string[]): { byOutput: Record<string, number | null>; worst: number | null } {
  const byOutput: Record<string, number | null> = {};
  let worst: number | null = null;
  b.outputSet.forEach((o, k) => {
    // The single-tensor path names its only output "outputs": match by position then.
    const r = ref.outputSet.find((x) => x.name === o.name) ?? (ref.outputSet.length === b.outputSet.length ? ref.outputSet[k] : undefined);
    let d: number | null = null;
    try {
      d = r ? maxAbsDiffAny(o, r) : null;
    } catch (err) {
      const note = `${b.runtime}: output "${o.name}" not compared with ${ref.runtime}: ${(err as Error).message} (shapes [${o.shape.join(", ")}] and [${r!.shape.join(", ")}])`;
      if (!notes.includes(note)) notes.push(note);
    }
    byOutput[o.name] = d;
    if (d !== null && (worst === null || d > worst)) worst = d;
  });
  return { byOutput, worst };
}

/** Recomputes every runtime's figures; idempotent, called after each benchmark and at the end. */
export function updateNumerics(s: RunSession): void {
  const ref = referenceRuntime(s);
  const refResult = ref ? s.benchmarks.get(ref)! : null;
  const labels = s.heldout?.labels ?? null;
  for (const [name, b] of s.benchmarks) {
    b.accuracy = labels ? accuracy(b.outputs, labels) : null;
    const d = refResult && name !== ref ? diffs(b, refResult, s.notes) : null;
    b.maxAbsDiff = d ? d.worst : null;
    b.outputDiffs = d ? d.byOutput : null;
    const rec = s.runtimes.find((r) => r.name === name);
    if (rec) {
      rec.accuracy = b.accuracy;
      rec.maxAbsDiff = b.maxAbsDiff;
      rec.outputs = b.outputSet.map((o) => ({ name: o.name, dtype: o.dtype, shape: o.shape, maxAbsDiff: d ? (d.byOutput[o.name] ?? null) : null }));
    }
  }
}
