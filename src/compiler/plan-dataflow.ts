/**
 * Dataflow check of a plan header: it must compute something, and each output must be
 * written by an op or be a plan input; otherwise a runtime hands back an arena slot nobody
 * wrote (an `ops: []` plan "succeeded" that way, issue 10). memlane-rt's plan_reader.cc has
 * the same check (check_dataflow) with the same words, so both refuse the same plans alike.
 */
import type { PlanHeader } from "./plan-format.ts";

/** The first dataflow problem as [field, expected, found], or null when there is none. */
export function dataflowProblem(h: Pick<PlanHeader, "tensors" | "inputs" | "outputs" | "ops">): [string, string, string] | null {
  if (h.ops.length === 0) return ["ops", "at least one op", "none (an empty list)"];
  const written = new Set<number>(h.inputs);
  for (const op of h.ops) for (const id of op.outputs) written.add(id);
  for (const [i, id] of h.outputs.entries())
    if (!written.has(id))
      return [`outputs[${i}] (${h.tensors[id]?.name ?? "?"})`, "a tensor written by an op or a plan input", `tensor ${id}, which nothing writes`];
  return null;
}
