/**
 * How many samples memlane-rt's CPU backend runs at once, from the plan: the rule of
 * native/runtime/src/cpu/cpu_backend.cc (`prepare`), mirrored. It runs a batch in chunks whose
 * arena fits 256 KiB (at least one sample), but only where a chunk is a smaller batch: every
 * tensor batch-first, and no op that reaches across samples (`mixes_samples` there): no Range
 * (its values count the whole batch), no Gather or GatherElements along the batch axis and no
 * GatherND whose index tuples reach it (their values are sample numbers of the whole batch), no
 * CumSum along the batch axis (it sums over samples). Otherwise the whole batch runs at once,
 * and its whole arena is touched.
 *
 * Why it matters: the estimate took every model as chunked, so a transformer with position ids
 * (Range) or a sequence-first LSTM was planned one sample of arena where the backend touches
 * the largest batch's: distilbert 0.22 MiB against 1.75 at batch 8, its steady RSS 1.5 MiB over.
 */
import type { PlanHeader, PlanTensor } from "./plan-format.ts";

/** cpu_backend.cc kChunkArenaBytes. */
export const NATIVE_CHUNK_ARENA_BYTES = 256 * 1024;

const batchAxis = (t: PlanTensor) => t.shape.findIndex((d) => d < 0);

/** Whether the CPU backend may run this plan in chunks of samples (cpu_backend.cc `chunkable`). */
export function nativeChunkable(h: Pick<PlanHeader, "tensors" | "ops">): boolean {
  if (h.tensors.some((t) => t.kind !== "weight" && t.shape[0] !== -1)) return false;
  return !h.ops.some((op) => mixesSamples(h.tensors, op));
}

/** cpu_backend.cc `mixes_samples`: the op's result for a sample depends on the batch's other samples. */
function mixesSamples(tensors: PlanHeader["tensors"], op: PlanHeader["ops"][number]): boolean {
  if (op.op === "Range") return true;
  if (op.inputs.length < 1 || op.inputs[0] === -1) return false;
  const bax = batchAxis(tensors[op.inputs[0]!]!);
  if (bax < 0) return false;
  if (op.op === "Gather" || op.op === "GatherElements" || op.op === "CumSum") return bax === op.attrs.axis;
  const idx = op.inputs[1] === undefined || op.inputs[1] === -1 ? undefined : tensors[op.inputs[1]];
  return op.op === "GatherND" && idx !== undefined && idx.shape.length > 0 && bax < idx.shape.at(-1)!;
}

/**
 * Samples a chunk holds: as many as fit the budget (1 at least, the batch at most); the batch
 * where the plan cannot be chunked. (A plan with Concat inputs in place runs one sample at a
 * time, which this gives it too: runsOneSampleAtATime.)
 */
export function nativeChunkSamples(chunkable: boolean, bytesPerSample: number, maxBatch: number): number {
  if (!chunkable || bytesPerSample <= 0) return maxBatch;
  return Math.max(1, Math.min(maxBatch, Math.floor(NATIVE_CHUNK_ARENA_BYTES / bytesPerSample)));
}

/**
 * Whether the CPU backend runs this plan one sample at a time at every batch: chunkable, and
 * an arena of more than half the chunk budget. The compiler lays Concat inputs in place only
 * then (concat-in-place.ts; such a plan must run so, and the backend then always does).
 */
export function runsOneSampleAtATime(h: Pick<PlanHeader, "tensors" | "ops" | "arena">): boolean {
  return nativeChunkable(h) && nativeChunkSamples(true, h.arena.bytesPerSample, 2) === 1;
}

/**
 * How the CPU backend runs the largest batch with `threads` (cpu_backend.cc `prepare` and
 * `run_lanes`, mirrored): a chunkable plan with 2+ threads runs its chunks side by side, one
 * lane a thread, each lane in its own slice of arena and workspace sized for `chunk` samples
 * (at most the chunk budget's, at most an even share of the batch). `used`: the lanes the
 * batch's chunks reach; `touchedSamples`: the arena samples they write, all lanes together.
 */
export function nativeLanes(chunkable: boolean, threads: number, chunkSamples: number, maxBatch: number): { lanes: number; chunk: number; used: number; touchedSamples: number } {
  const lanes = chunkable && threads > 1 && maxBatch > 1 ? threads : 1;
  const chunk = Math.min(chunkSamples, Math.ceil(maxBatch / lanes));
  const chunks = Math.ceil(maxBatch / chunk);
  const used = Math.min(lanes, chunks);
  return { lanes, chunk, used, touchedSamples: Math.min(maxBatch, used * chunk) };
}
