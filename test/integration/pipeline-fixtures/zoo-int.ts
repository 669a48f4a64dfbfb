// A zoo model whose input is int64 (tiny-gpt's byte ids), exported with random weights and
// benchmarked on torch and ORT: the eval set must be ids in the embedding's range, in the
// model's own dtype (test/integration/zoo-int-export.test.ts).
import { pipeline } from "../../../src/index.ts";

export default pipeline("zoo-int", { batchSizes: [1, 4], iterations: 2, warmup: 1, threads: 1 })
  .export({ zoo: "tiny-gpt", evalSamples: 12 })
  .benchmark("python-torch")
  .benchmark("python-ort");
