/**
 * What ORT's CPU arena leaves resident after a benchmark's requests (docs/memory.md, "ORT's
 * activations: its arena replayed"): the run's trace (ort-pattern.ts) fed through a replay of
 * the arena (bfc-arena.ts) in the order the worker runs its shapes.
 *
 * For each new input shape ORT's first request runs without a memory pattern: every tensor
 * comes from the arena, one by one, in the trace's order. It records the pattern, and each
 * later request of that shape asks the arena for the pattern as one block, written over its
 * length, and frees it at the end (the same chunk comes back every time after that); the
 * graph's outputs, and the scratch a kernel takes while it runs (ort-scratch.ts), come from the
 * arena apart from it, in both kinds of request. The
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
 * pattern of the new shape (execution_frame.cc). Those of a fixed size have their place in the
 * block: GPT-2's position embeddings ([1, seq, hidden]) and their Cast, taken from the arena as
 * well, moved where its held eval outputs went, and its eval pass grew the replay's arena 4 MiB
 * where ORT's grew 16.
 *
 * `loadFreeBytes`: the room the session's load left unwritten in the arena (the load probe's
 * untouchedMiB, bfc-arena.ts): the first requests take it before the arena grows.
 */
import { type ArenaChunk, BfcArenaReplay } from "./bfc-arena.ts";
import { bytesAtBatch, patternBytesAtBatch, type TraceEvent } from "./ort-pattern.ts";

export interface ArenaReplay {
  /**
   * Bytes of the arena's regions ever written to, and of their handle tables (bfc-arena.ts),
   * and of the load's room (loadFreeBytes) written since, after the first request (first-inference).
   */
  firstRequestBytes: number;
  /** ... and after every request of the run (steady-inference). */
  residentBytes: number;
  /** The handle tables' part of residentBytes. */
  handleTableBytes: number;
  /** The regions' sizes, in the order the arena took them from malloc (not the load's room, which it took before). */
  regions: number[];
  /** The bytes of each region ever written to, in the same order (no handle tables). */
  regionsResident: number[];
  /** The same for the regions the first request made, as they were after it (firstRequestBytes's parts). */
  firstRequestRegionsResident: number[];
}

/** The eval pass's requests: the eval set in chunks of the largest batch, a shorter one last. */
export function evalChunks(evalSamples: number, chunk: number): number[] {
  if (!Number.isInteger(chunk) || chunk < 1) throw new Error(`evalChunks: the chunk must be a positive integer, got ${chunk}`);
  const chunks: number[] = [];
  for (let start = 0; start < evalSamples; start += chunk) chunks.push(Math.min(chunk, evalSamples - start));
  return chunks;
}

/** ORT's memory-pattern key for inputs fed at these shapes (-1: the batch): the XOR of every dim. */
export function ortPatternKey(inputDims: readonly (readonly number[])[], batch: number): number {
  let key = 0;
  for (const dims of inputDims) for (const d of dims) key ^= d < 0 ? batch : d;
  return key;
}

/**
 * The eval pass as the worker runs it (ort-arena.ts's header): its requests in order, and
 * whether it keeps every request's outputs until the pass ends. python-ort does: ORT's Python
 * binding hands back numpy arrays over the arena's own chunks, and the worker keeps each
 * chunk's until it joins them (tasks/io_spec.py over_eval_set), so they stay taken from the
 * arena; onnxruntime-node copies its outputs out, and the arena gets them back at once.
 * Measured on the zoo's LSTM at batch 64, seq 128 (python-ort, bare): the 4 chunks' outputs
 * (8.25 MiB) grew RSS 2.25 MiB while kept (room the arena already had) and 8.25 joined.
 */
export interface EvalPass {
  chunks: readonly number[];
  holdOutputs: boolean;
}

/**
 * The arena after the worker's requests, from a trace per sample (ortRunTracePerSample):
 * `batches`, each shape's first request and then one with its pattern, then `evalPass`'s.
 * `patternKey`: ORT's cache key of a batch size (ortPatternKey); without it every batch size
 * has a pattern of its own.
 */
export function replayOrtArena(tracePerSample: readonly TraceEvent[], batches: readonly number[], patternKey?: (batch: number) => number, evalPass?: EvalPass, loadFreeBytes = 0): ArenaReplay {
  if ([...batches, ...(evalPass?.chunks ?? [])].some((b) => !Number.isInteger(b) || b < 1))
    throw new Error(`replayOrtArena: batch sizes must be positive integers, got [${batches.join(", ")}] and eval chunks [${evalPass?.chunks.join(", ") ?? ""}]`);
  const arena = new BfcArenaReplay({ loadFreeBytes });
  const resident = () => arena.report().reduce((s, r) => s + r.residentBytes + r.handleTableBytes, arena.loadRoomResidentBytes());
  const isOutput = new Set(tracePerSample.flatMap((e) => (e.kind === "alloc" && e.output ? [e.id] : [])));
  const held: ArenaChunk[] = [];
  // A request without a pattern for its sizes: every tensor from the arena, in the trace's
  // order; its outputs go back after it, or into `keep`. `staleFrom`: the batch size whose
  // pattern ORT uses for this one (a stale key): a tensor of the same size at both (one that does
  // not grow with the batch) takes its place in that pattern's block, not the arena; the outputs
  // and the kernels' scratch have none there (withPattern takes them apart from it too).
  const tensorByTensor = (batch: number, keep: ArenaChunk[] | null, staleFrom?: number) => {
    const live = new Map<number, ArenaChunk>();
    for (const e of tracePerSample) {
      if (e.kind === "alloc") {
        // A tensor without the batch (0 a sample), unless ORT computes it at run time (fixed),
        // is not the batch's: too small to matter here.
        const inBlock = staleFrom !== undefined && !e.output && !e.scratch && bytesAtBatch(e, staleFrom) === bytesAtBatch(e, batch);
        if (e.size > 0 && !inBlock) live.set(e.id, arena.alloc(bytesAtBatch(e, batch)));
      } else if (!(keep && isOutput.has(e.id))) {
        const c = live.get(e.id);
        if (c) arena.release(c);
        live.delete(e.id);
      }
    }
    for (const [id, c] of live) {
      if (keep && isOutput.has(id)) keep.push(c);
      else arena.release(c);
    }
  };
  // A request with its shape's pattern: the block, then the outputs and the kernels' scratch
  // apart from it as the run reaches them; the scratch goes back as its kernel returns, the
  // block at the end of the run, the outputs when the caller lets go of them.
  const withPattern = (batch: number, keep: ArenaChunk[] | null) => {
    const pattern = patternBytesAtBatch(tracePerSample, batch);
    const block = pattern > 0 ? arena.alloc(pattern) : null;
    const apart = new Map<number, ArenaChunk>();
    for (const e of tracePerSample) {
      if (e.kind === "alloc" && (e.output || e.scratch) && e.size > 0) apart.set(e.id, arena.alloc(bytesAtBatch(e, batch)));
      else if (e.kind === "free" && !isOutput.has(e.id) && apart.has(e.id)) {
        arena.release(apart.get(e.id)!);
        apart.delete(e.id);
      }
    }
    if (block) arena.release(block);
    for (const c of apart.values()) {
      if (keep) keep.push(c);
      else arena.release(c);
    }
  };
  const patternFrom = new Map<number, number>(); // key -> the batch size whose pattern ORT cached under it
  /** One request: with its shape's pattern, beside another shape's, or recording its own. */
  const request = (batch: number, keep: ArenaChunk[] | null): "pattern" | "stale" | "recorded" => {
    const key = patternKey ? patternKey(batch) : batch;
    const cached = patternFrom.get(key);
    if (cached === batch) {
      withPattern(batch, keep);
      return "pattern";
    }
    if (cached !== undefined) {
      // Another shape's pattern: its block, and this shape's tensors one by one, every request.
      const stale = patternBytesAtBatch(tracePerSample, cached);
      const block = stale > 0 ? arena.alloc(stale) : null;
      tensorByTensor(batch, keep, cached);
      if (block) arena.release(block);
      return "stale";
    }
    patternFrom.set(key, batch);
    tensorByTensor(batch, keep);
    return "recorded";
  };
  let firstRequestBytes = 0;
  let firstRequestRegionsResident: number[] = [];
  batches.forEach((batch, i) => {
    const first = request(batch, null);
    if (i === 0) {
      firstRequestBytes = resident();
      firstRequestRegionsResident = arena.report().map((r) => r.residentBytes);
    }
    // The later requests of a shape whose pattern the first recorded use it (all alike).
    if (first === "recorded") request(batch, null);
  });
  for (const chunk of evalPass?.chunks ?? []) request(chunk, evalPass!.holdOutputs ? held : null);
  for (const c of held) arena.release(c);
  const report = arena.report();
  return {
    firstRequestBytes,
    residentBytes: resident(),
    handleTableBytes: report.reduce((s, r) => s + r.handleTableBytes, 0),
    regions: report.map((r) => r.bytes),
    regionsResident: report.map((r) => r.residentBytes),
    firstRequestRegionsResident,
  };
}
