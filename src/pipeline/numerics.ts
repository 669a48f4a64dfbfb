/**
 * Accuracy (argmax vs held-out labels) and max abs diff against the reference runtime's
 * outputs (python-torch, else ONNX Runtime: python-ort, then node-ort), computed here for every runtime alike.
 */
import { accuracy, maxAbsDiff } from "./metrics.ts";
import type { RunSession } from "./session.ts";

export const REFERENCE_ORDER = ["python-torch", "python-ort", "node-ort"] as const;

export function referenceRuntime(s: RunSession): string | null {
  return REFERENCE_ORDER.find((r) => s.benchmarks.has(r)) ?? null;
}

/** Recomputes every runtime's figures; idempotent, called after each benchmark and at the end. */
export function updateNumerics(s: RunSession): void {
  const ref = referenceRuntime(s);
  const refOut = ref ? s.benchmarks.get(ref)!.outputs : null;
  const labels = s.heldout?.labels ?? null;
  for (const [name, b] of s.benchmarks) {
    b.accuracy = labels ? accuracy(b.outputs, labels) : null;
    b.maxAbsDiff = refOut && name !== ref ? maxAbsDiff(b.outputs, refOut) : null;
    const rec = s.runtimes.find((r) => r.name === name);
    if (rec) {
      rec.accuracy = b.accuracy;
      rec.maxAbsDiff = b.maxAbsDiff;
    }
  }
}
