/**
 * A transformer end to end: a byte-level GPT (3 layers, width 96, context 64) trained on the
 * Python standard library's own .py files (every machine has them; held-out files are not
 * trained on), exported with a dynamic batch (int64 input [B, 64] -> logits of the next
 * byte [B, 256]) and deployed on every runtime. Accuracy is next-byte accuracy on held-out
 * windows; it must agree across runtimes within rounding.
 *
 *   npm run demo:gpt        (= memlane run pipelines/tiny-gpt.ts; about 2 minutes of training on 2 cores)
 */
import { pipeline } from "../src/index.ts";

export interface TinyGptOptions {
  /** Training epochs of `stepsPerEpoch` optimizer steps each. */
  epochs: number;
  stepsPerEpoch: number;
  /** Fail the train stage below this held-out next-byte accuracy (chance is about 1 in 40). */
  minAccuracy?: number;
  iterations?: number;
}

/** The full run (npm run demo:gpt): 1500 steps of 32 windows. */
export const FULL: TinyGptOptions = { epochs: 6, stepsPerEpoch: 250, minAccuracy: 0.55 }; // 1500 steps reach 0.648 (seed 0)
/** For tests: a few steps, the same stages. */
export const FAST: TinyGptOptions = { epochs: 1, stepsPerEpoch: 10, iterations: 5 };

export function tinyGpt(o: TinyGptOptions) {
  return pipeline("tiny-gpt", { batchSizes: [1, 64], iterations: o.iterations ?? 30, warmup: 3, threads: 1 })
    .train({
      arch: "tiny-gpt",
      epochs: o.epochs,
      stepsPerEpoch: o.stepsPerEpoch,
      batchSize: 32,
      seed: 0,
      threads: 2, // training may use both cores; the benchmarks use one thread each
      ...(o.minAccuracy !== undefined ? { minAccuracy: o.minAccuracy } : {}),
    })
    .export()
    .benchmark("python-torch")
    .benchmark("python-ort")
    .benchmark("node-ort")
    .benchmark("native");
}

export default tinyGpt(FULL);
