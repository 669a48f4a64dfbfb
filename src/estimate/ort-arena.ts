/**
 * What ORT's CPU arena leaves resident after a benchmark's requests (docs/memory.md, "ORT's
 * activations: its arena replayed"): the run's trace (ort-pattern.ts) fed through a replay of
 * the arena (bfc-arena.ts) in the order the worker runs its shapes.
 *
 * For each new input shape ORT's first request runs without a memory pattern: every tensor
 * comes from the arena, one by one, in the trace's order. It records the pattern, and each
 * later request of that shape asks the arena for the pattern as one block, written over its
 * length, and frees it at the end (the same chunk comes back every time after that); the
 * graph's outputs come from the arena apart from it, in both kinds of request. The
 * worker (python/memlane_worker/tasks/infer_ort.py) runs the first batch size at
 * first-inference, then every batch size in order at steady-inference, then the eval set in
 * chunks of the largest batch: a last, shorter chunk is one more shape.
 *
 * ORT caches a pattern under the XOR of every input dim (CalculateMemoryPatternsKey in
 * onnxruntime/core/framework/session_state.cc), not under the shapes themselves. With an even
 * number of inputs carrying the batch (a language model's input_ids and attention_mask, both
 * [N, seq]) the batch cancels out: every batch size finds the first one's pattern. ORT then
 * allocates that pattern's block, takes from the arena one by one every tensor whose size
 * differs from its block (all those with the batch), in every request, and never records a
 * pattern of the new shape (execution_frame.cc).
 */
import { type ArenaChunk, BfcArenaReplay } from "./bfc-arena.ts";
import { patternBytesAtBatch, type TraceEvent } from "./ort-pattern.ts";

export interface ArenaReplay {
  /** Bytes of the arena's regions ever written to after the first request (first-inference). */
  firstRequestBytes: number;
  /** ... and after every request of the run (steady-inference). */
  residentBytes: number;
  /** The regions' sizes, in the order the arena took them from malloc. */
  regions: number[];
}

/** The distinct shapes the worker runs, in the order it first runs them. */
export function shapesInRunOrder(batchSizes: readonly number[], evalSamples: number): number[] {
  if (batchSizes.length === 0 || batchSizes.some((b) => !Number.isInteger(b) || b < 1))
    throw new Error(`shapesInRunOrder: batch sizes must be positive integers, got [${batchSizes.join(", ")}]`);
  const last = evalSamples % Math.max(...batchSizes);
  return [...new Set([...batchSizes, ...(last > 0 ? [last] : [])])];
}

/** ORT's memory-pattern key for inputs fed at these shapes (-1: the batch): the XOR of every dim. */
export function ortPatternKey(inputDims: readonly (readonly number[])[], batch: number): number {
  let key = 0;
  for (const dims of inputDims) for (const d of dims) key ^= d < 0 ? batch : d;
  return key;
}

/**
 * The arena after the worker's requests, from a trace per sample (ortRunTracePerSample).
 * `patternKey`: ORT's cache key of a batch size (ortPatternKey); without it every batch size
 * has a pattern of its own.
 */
export function replayOrtArena(tracePerSample: readonly TraceEvent[], batches: readonly number[], patternKey?: (batch: number) => number): ArenaReplay {
  const arena = new BfcArenaReplay();
  const resident = () => arena.report().reduce((s, r) => s + r.residentBytes, 0);
  // A request without a pattern for its sizes: every tensor from the arena, in the trace's order.
  const tensorByTensor = (batch: number) => {
    const live = new Map<number, ArenaChunk>();
    for (const e of tracePerSample) {
      if (e.kind === "alloc") {
        // A tensor without the batch (0 a sample) is not the batch's: too small to matter here.
        if (e.size > 0) live.set(e.id, arena.alloc(e.size * batch));
      } else {
        const c = live.get(e.id);
        if (c) arena.release(c);
        live.delete(e.id);
      }
    }
    for (const c of live.values()) arena.release(c);
  };
  const patternFrom = new Map<number, number>(); // key -> the batch size whose pattern ORT cached under it
  let firstRequestBytes = 0;
  batches.forEach((batch, i) => {
    const key = patternKey ? patternKey(batch) : batch;
    const cached = patternFrom.get(key);
    if (cached !== undefined) {
      // Another shape's pattern: its block, and this shape's tensors one by one, every request.
      const stale = patternBytesAtBatch(tracePerSample, cached);
      const block = stale > 0 ? arena.alloc(stale) : null;
      tensorByTensor(batch);
      if (block) arena.release(block);
      if (i === 0) firstRequestBytes = resident();
      return;
    }
    patternFrom.set(key, batch);
    tensorByTensor(batch);
    if (i === 0) firstRequestBytes = resident();
    // Later requests: the pattern's block, the outputs apart from it; the block goes back at
    // the end of the run, the outputs when the caller lets go of them.
    const pattern = patternBytesAtBatch(tracePerSample, batch);
    const block = pattern > 0 ? [arena.alloc(pattern)] : [];
    const outputs = tracePerSample.flatMap((e) => (e.kind === "alloc" && e.output && e.size > 0 ? [arena.alloc(e.size * batch)] : []));
    for (const c of [...block, ...outputs]) arena.release(c);
  });
  return { firstRequestBytes, residentBytes: resident(), regions: arena.report().map((r) => r.bytes) };
}
