/**
 * How large a generated integer id may be: an integer input that reaches the indices of a
 * Gather (an embedding lookup), directly or through ops that only move or retype values
 * (Cast, Unsqueeze, Reshape...) or select some of them (a Gather reading it as its data: a
 * LayoutLM's bbox[:, :, 0] before its x-position embedding), must stay below that Gather's data
 * size on its axis (the vocabulary). A value outside it is an out-of-range read that ORT refuses
 * and a native runtime may not check.
 */
import type { OnnxIo } from "./onnx-io.ts";

/** Ops whose output holds the same values as their first input (moved, reshaped, retyped). */
const PASS_THROUGH = new Set([
  "Cast", "CastLike", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Expand", "Transpose", "Slice", "Tile",
]);

/** Ops whose output holds some of their first input's values (selected by the others). */
const SELECTS = new Set(["Gather", "GatherElements", "GatherND"]);

export interface IndexBound {
  /** Exclusive upper bound of a valid id. */
  bound: number;
  /** The Gather node that sets it (the smallest when several do). */
  node: string;
}

/** For every input reaching a Gather's indices: the smallest vocabulary it indexes. */
export function indexBounds(io: OnnxIo): Map<string, IndexBound> {
  const consumers = new Map<string, OnnxIo["nodes"]>();
  for (const n of io.nodes) for (const i of n.inputs) if (i) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  const out = new Map<string, IndexBound>();
  for (const input of io.inputs) {
    if (input.dtype !== "int64" && input.dtype !== "int32") continue;
    let best: IndexBound | undefined;
    const seen = new Set<string>();
    const queue = [input.name];
    while (queue.length > 0) {
      const t = queue.shift()!;
      if (seen.has(t)) continue;
      seen.add(t);
      for (const n of consumers.get(t) ?? []) {
        if (n.op === "Gather" && n.inputs[1] === t) {
          const data = io.constDims.get(n.inputs[0]!);
          if (data && data.length > 0) {
            const axis = (n.axis ?? 0) < 0 ? (n.axis ?? 0) + data.length : (n.axis ?? 0);
            const size = data[axis];
            if (size !== undefined && size > 0 && (best === undefined || size < best.bound)) best = { bound: size, node: n.name };
          }
        } else if ((PASS_THROUGH.has(n.op) && n.inputs[0] === t) || n.op === "Concat" || (SELECTS.has(n.op) && n.inputs[0] === t)) {
          queue.push(...n.outputs);
        }
      }
    }
    if (best) out.set(input.name, best);
  }
  return out;
}
