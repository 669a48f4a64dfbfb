/**
 * node-ort's dead output tensors: what its requests' outputs leave in the child's memory until V8
 * collects them (the steady-inference peak) and what malloc keeps once it has (the end figures),
 * beyond the blocks ORT's load left held (ort-heap-reuse.ts), whose pages heldMiB counts already.
 */
import type { ModelTerms, RunShape } from "./model-terms.ts";
import { bytesServedFromHeld } from "./ort-heap-reuse.ts";
import type { FreePieces } from "./ort-load.ts";

const MIB = 2 ** 20;

/**
 * V8 collects dead ArrayBuffers (onnxruntime-node's output tensors are) when their bytes since
 * the last collection pass a limit, not when the script drops them, and malloc keeps what a
 * collection frees. So node-ort's steady RSS grows with the output bytes its requests made, up
 * to that limit and about one request's outputs more; python-ort's outputs go when they are
 * dropped. Measured on bert-tiny in bare onnxruntime-node 1.30 (Node 20.20, glibc 2.36), the
 * RSS after N requests of one batch size less after 2, 1 thread, two processes each:
 * 0.5 MiB a request: 4.2 / 14.2 / 26.8 MiB at N = 10 / 30 / 55 (no collection yet); 2 MiB:
 * 16.2 / 24.0 / 27.4; 8 MiB: -1.3 / 22.8 / 31.5-47.5. The arrayBuffers total then cycled
 * between 4-6 and 30-37 MiB. A small GPT-2 export's 31 MiB of logits a request (compare's
 * defaults) left 57 and 82 MiB in two runs: with large outputs the collection lags by a request
 * or two. So the plateau is NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 requests, the middle of those.
 */
export const NODE_DEAD_OUTPUT_LIMIT_MIB = 26;

/**
 * node-ort's dead output tensors at the steady-inference mark, MiB: the outputs every request
 * made (run.calls at each batch size), up to NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 requests of the
 * largest batch. 0 without run.calls or a known output size.
 */
export function nodeDeadOutputMiB(t: Pick<ModelTerms, "outputPerSampleMiB">, run: RunShape): number {
  const perSample = t.outputPerSampleMiB ?? 0;
  const calls = run.calls ?? 0;
  if (perSample <= 0 || calls <= 0) return 0;
  const batches = run.batchSizes ?? [...new Set([1, run.maxBatch])];
  const made = batches.reduce((sum, b) => sum + calls * b * perSample, 0);
  return Math.min(made, NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 * run.maxBatch * perSample);
}

/**
 * Features.deadOutputMiB of node-ort: what its peak holds beyond the end figures' terms. Its
 * timed requests leave uncollected outputs (nodeDeadOutputMiB), then its eval pass keeps every
 * chunk's outputs until it copies them into one (node-ort-io.mjs gatherOutputs), the copy that
 * the end figures hold (evalOutputMiB, slope 1 on the peak as on the end). Whether V8 collects
 * the requests' dead outputs before the chunks and their copy pile up on them is its timing, a
 * coin per run, so the estimate takes the middle of two outcomes:
 * - collected first: the larger of the dead outputs while the copy is not there yet (beyond it)
 *   and the chunks' outputs beside their copy;
 * - not collected: the larger of the dead outputs and the chunks' outputs, both beyond the copy.
 * Measured at compare's defaults on encoders of hidden 128 (4 MiB a request of 64, 16 MiB of eval
 * outputs, 32 of dead requests), peak less end figures: 20 to 32 MiB over seven encoders on one
 * machine (2026-12-08, none of their dead requests kept at the end), 23 to 27 on another
 * (2026-12-07, ESM's, XLM's and RoBERTa's); the outcomes say 16 and 32. Taking the first alone,
 * the seven's peaks were -3.3 to -7.8 %; the second alone had RoBERTa, ALBERT, ESM and XLM at
 * +4.0 to +12.2 %. Decoders, whose chunks outweigh their dead requests, have one outcome.
 * Before (calibration format 34) the chunks rode on a fitted slope of 1.64 on the eval outputs,
 * fitted on a probe whose 64 MiB of chunks took the room of 22.5 MiB of dead requests: a decoder
 * LM's 625 MiB of logits (256 eval samples) put its peak 13 % short.
 * `heldLeft`: the blocks the load left held that ORT's arena did not take (ort-heap-reuse.ts
 * arenaResidentBeyondHeld); the dead outputs they hold cost no RSS (heldServedMiB).
 */
export function nodePeakBeyondEndMiB(t: Pick<ModelTerms, "outputPerSampleMiB" | "outputTensorsPerSampleMiB">, run: RunShape, heldLeft: readonly FreePieces[] | null = null): number {
  const dead = nodeDeadOutputMiB(t, run);
  const beyondHeld = dead - heldServedMiB(outputTensorsMiB(t, run.maxBatch), dead, heldLeft);
  const evalOutputs = (t.outputPerSampleMiB ?? 0) * run.evalSamples;
  const collectedFirst = Math.max(beyondHeld - evalOutputs, evalOutputs);
  const notCollected = Math.max(beyondHeld, evalOutputs);
  return (collectedFirst + notCollected) / 2;
}

/**
 * How much of `deadMiB` of dead output tensors (requests of `tensorsMiB` each, as many as it
 * takes) the held blocks left after ORT's arena take, MiB. A dead tensor's buffer is a malloc'd
 * block on the child's main thread, where onnxruntime-node loaded, and glibc serves it from a
 * free chunk that holds it before it grows the heap or maps a block (ort-heap-reuse.ts): those
 * pages are in heldMiB already, and freeing the tensor gives the chunk back to the same pool.
 * Measured, a DistilBERT of base size (hidden 768, 6 layers; 253 MiB of weights, 0.375 MiB of
 * output a sample) at `--batch 1,8 --eval-samples 32`: its load left 92-101 MiB held (four
 * 8 MiB blocks and some 27 of 2 MiB among them) and node-ort's steady RSS was 494.9 and
 * 495.4 MiB after 1 and 30 timed requests a batch size; counting its 30.5 MiB of dead 3 MiB
 * outputs as new pages put the estimate +5.5 % over.
 */
export function heldServedMiB(tensorsMiB: readonly number[], deadMiB: number, heldLeft: readonly FreePieces[] | null): number {
  const perRequest = tensorsMiB.reduce((a, x) => a + x, 0);
  if (!heldLeft || deadMiB <= 0 || perRequest <= 0) return 0;
  const requests = Math.ceil(deadMiB / perRequest - 1e-9);
  const blocks = Array.from({ length: requests }, () => tensorsMiB.map((mib) => Math.round(mib * MIB))).flat();
  return Math.min(deadMiB, bytesServedFromHeld(blocks, heldLeft) / MIB);
}

/** One request's output tensors at a batch size, MiB each (the outputs as one where their split is unknown). */
function outputTensorsMiB(t: Pick<ModelTerms, "outputPerSampleMiB" | "outputTensorsPerSampleMiB">, batch: number): number[] {
  const perSample = t.outputTensorsPerSampleMiB ?? (t.outputPerSampleMiB ? [t.outputPerSampleMiB] : []);
  return perSample.map((p) => p * batch);
}

/** glibc's default mmap threshold, and the most its dynamic one rises to on 64-bit (mallopt(3)). */
const MMAP_THRESHOLD_MIN_MIB = 128 / 1024;
const MMAP_THRESHOLD_MAX_MIB = 32;
/** The most of the model file ORT reads into one buffer at load (and frees), MiB. */
const ORT_READ_BUFFER_MAX_MIB = 4;

/**
 * glibc's mmap threshold after ORT's load, MiB: freeing an mmapped block raises it to that
 * block's size, and the load frees its read buffer of the model file (the file, up to 4 MiB)
 * and a copy of every initializer. Measured after a Python session creation (the smallest
 * power-of-two block then mmapped, so the threshold lies in [half of it, it)): opt, a 0.86 MB
 * file of 0.25 MiB initializers, 1 MiB; a MatMul with one 16 MiB weight, 32 MiB; the same with a
 * 1 MiB weight, 2 MiB; resnet18 (9 MiB largest kernel, 45 MiB file), 16 MiB.
 */
export function ortLoadMmapThresholdMiB(t: Pick<ModelTerms, "largestInitializerMiB" | "fileMiB">): number {
  const freed = Math.max(t.largestInitializerMiB, Math.min(t.fileMiB, ORT_READ_BUFFER_MAX_MIB));
  return Math.min(MMAP_THRESHOLD_MAX_MIB, Math.max(MMAP_THRESHOLD_MIN_MIB, freed + CHUNK_BEYOND_REQUEST_MIB));
}

/**
 * glibc sets the threshold to the freed block's chunk: its request and header rounded up to a
 * page. So a later request of the same size is below it and comes from the heap: RemBERT's
 * 4 MiB copy of its 32 eval samples' outputs, after ORT's 4 MiB read buffer of the file, did
 * (node-ort kept 14 MiB of dead requests below it, where a mapped copy would have let the heap
 * be trimmed: -10.8 % steady).
 */
const CHUNK_BEYOND_REQUEST_MIB = 4096 / MIB;

/**
 * The part of node-ort's dead outputs (nodeDeadOutputMiB) that malloc keeps once V8 collects
 * them, MiB. V8 frees an output tensor's buffer with free(): a buffer at or above glibc's mmap
 * threshold (ortLoadMmapThresholdMiB) goes back to the kernel, one below it stays in the heap as
 * free chunks, as many as were dead at once. Measured, node-ort at batches 1,8, RSS after a
 * collection: a MatMul with one 16 MiB weight and 2 MiB of output a request of 8 kept them (end
 * = peak, 135.6 MiB, in three runs); the same with a 1 MiB weight gave them back (93.3, peak
 * 120.6); opt gave back its 4 MiB of logits a request of 8 and kept those of batch 1 (0.5 MiB a
 * request; malloc's free bytes +7.9 MiB over steady-inference). Per batch size, the largest. A
 * rule of thumb: the first mmapped output freed raises the threshold to its size, and whether
 * the heap's top is trimmed after the collection depends on the order of requests and
 * collections (docs/memory.md, "node-ort's end figures after a collection"). Those a held block
 * left after ORT's arena (`heldLeft`) takes were resident before and stay in the same pool
 * (heldServedMiB).
 */
export function nodeDeadOutputKeptMiB(t: Pick<ModelTerms, "outputPerSampleMiB" | "outputTensorsPerSampleMiB" | "largestInitializerMiB" | "fileMiB">, run: RunShape, heldLeft: readonly FreePieces[] | null = null): number {
  return nodeDeadOutputKept(t, run, heldLeft).mib;
}

/**
 * nodeDeadOutputKeptMiB, and where the outcome is a coin the two outcomes, `rangeMiB`: none
 * kept, or the pinned requests'. The estimate takes their middle, as it does for the held memory
 * the load probe's processes disagree on (docs/memory.md, "Two coins, a message and a tail").
 * Two runs make a coin:
 * - the timed requests raised glibc's threshold so that the eval pass can leave the heap's top
 *   free (timedRequestsMmapThresholdMiB);
 * - the eval pass can leave it free at the load's threshold (evalPassTrimsHeap), but its chunks'
 *   outputs fit in the room the dead requests left, so they need not reach the top. At compare's
 *   defaults (batches 1,64, 50 requests each, 256 eval samples), encoders of hidden 128 (64 KiB
 *   of output a sample: 4 MiB a request of 64 below a 4 MiB threshold, 16 MiB of eval chunks for
 *   up to 32 MiB of dead requests) kept 20.8 MiB in the free heap (RoBERTa, DeBERTa-v2, MPNet,
 *   RoFormer), 12.7 (ALBERT) and 4.8 (SqueezeBERT), where the estimate had said none (-7 % steady);
 *   the eval-outputs probe, whose 64 MiB of chunks overflow its 22.5 MiB of dead requests, keeps
 *   none.
 */
export function nodeDeadOutputKept(
  t: Pick<ModelTerms, "outputPerSampleMiB" | "outputTensorsPerSampleMiB" | "largestInitializerMiB" | "fileMiB">, run: RunShape, heldLeft: readonly FreePieces[] | null = null,
): { mib: number; rangeMiB: [number, number] | null } {
  const none = { mib: 0, rangeMiB: null };
  const dead = nodeDeadOutputMiB(t, run);
  const calls = run.calls ?? 0;
  if (dead <= 0 || calls <= 0) return none;
  const threshold = ortLoadMmapThresholdMiB(t);
  const batches = run.batchSizes ?? [...new Set([1, run.maxBatch])];
  let kept = 0;
  for (const b of batches) {
    const heapTensors = (t.outputTensorsPerSampleMiB ?? []).map((p) => p * b).filter((mib) => mib < threshold);
    const heapPerRequest = heapTensors.reduce((a, x) => a + x, 0);
    const deadInHeap = Math.min(calls * heapPerRequest, NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 * heapPerRequest);
    kept = Math.max(kept, deadInHeap - heldServedMiB(heapTensors, deadInHeap, heldLeft));
  }
  kept = Math.min(kept, dead);
  if (kept <= 0) return none;
  if (evalPassTrimsHeap(t, run, threshold)) {
    // The eval pass's chunks take the dead requests' free chunks before they grow the heap: where
    // their outputs overflow that room the last of them are the heap's top, and the end trims.
    if ((t.outputPerSampleMiB ?? 0) * run.evalSamples > kept) return none;
    return { mib: kept / 2, rangeMiB: [0, kept] };
  }
  if (evalPassTrimsHeap(t, run, timedRequestsMmapThresholdMiB(t, run))) return { mib: kept / 2, rangeMiB: [0, kept] };
  return { mib: kept, rangeMiB: null };
}

/**
 * glibc's mmap threshold once node-ort's timed requests have run, MiB: the load's
 * (ortLoadMmapThresholdMiB), raised to the chunk of the largest output they made at or above it
 * (mmapped, and glibc's dynamic threshold follows a freed mapped chunk up to 32 MiB), where V8
 * collected while they ran (their outputs passed NODE_DEAD_OUTPUT_LIMIT_MIB). A decoder LM's
 * logits at seq 128 (3.9 MiB a sample, 7.8 MiB threshold after the load) are 31.25 MiB a request
 * of 8: mapped until the first is freed, from the heap after it, and so are the eval pass's
 * chunks, while the copy of all 32 samples' (125 MiB) stays mapped. Then whether the final
 * collection leaves the heap's top free to trim, the batch-1 logits below it with it, is a coin.
 * node-ort `--batch 1,8 --iterations 5 --eval-samples 32`, of the 31.9 MiB of batch-1 logits:
 * Qwen2, Phi-3 and TrOCR's decoder kept none, GPT-NeoX all, Gemma 2 about 7 and Pegasus 17
 * (in earlier sessions BioGPT and M2M100 none, GPT-NeoX all or none in three runs).
 */
export function timedRequestsMmapThresholdMiB(t: Pick<ModelTerms, "outputPerSampleMiB" | "outputTensorsPerSampleMiB" | "largestInitializerMiB" | "fileMiB">, run: RunShape): number {
  const load = ortLoadMmapThresholdMiB(t);
  const calls = run.calls ?? 0;
  const batches = run.batchSizes ?? [...new Set([1, run.maxBatch])];
  const tensors = batches.flatMap((b) => outputTensorsMiB(t, b));
  const made = calls * tensors.reduce((a, x) => a + x, 0);
  if (made <= NODE_DEAD_OUTPUT_LIMIT_MIB) return load;
  const chunks = tensors.filter((mib) => mib >= load).map((mib) => mib + CHUNK_BEYOND_REQUEST_MIB).filter((c) => c <= MMAP_THRESHOLD_MAX_MIB);
  return Math.max(load, ...chunks);
}

/**
 * Whether the final collection leaves node-ort's heap trimmed: the eval pass's last heap
 * allocations are its chunks' outputs (below the mmap threshold), dead by the end mark, and the
 * copy of all its outputs, which lives on, is mmapped (at or above it). Freeing the chunks then
 * frees the heap's top, and glibc gives back everything above the highest live block, the dead
 * requests' chunks with it. Where that copy comes from the heap it pins all below it (deit,
 * mobilevit: the timed requests' chunks kept, as estimated); where the chunks' outputs are
 * mmapped themselves (a decoder LM's logits) they never were the top. Measured, node-ort
 * `--batch 1,8 --iterations 10 --eval-samples 16`: dinov2 (1 MiB chunk outputs, 2 MiB copy, a
 * 1.5 MiB threshold) kept about 5 of the 15 MiB estimated, mobilebert 6 of 29, the eval-outputs
 * probe 0 of 20 (its fit's residual +17 MiB).
 */
function evalPassTrimsHeap(t: Pick<ModelTerms, "outputTensorsPerSampleMiB">, run: RunShape, thresholdMiB: number): boolean {
  const largest = Math.max(0, ...(t.outputTensorsPerSampleMiB ?? []));
  const chunk = Math.min(run.maxBatch, run.evalSamples);
  return largest * chunk < thresholdMiB && largest * run.evalSamples >= thresholdMiB;
}
