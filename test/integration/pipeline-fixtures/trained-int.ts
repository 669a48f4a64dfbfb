// tiny-gpt trained briefly and benchmarked on torch straight from its checkpoint, no export
// stage: its held-out windows are int64 and reach the worker as they are (RunSession.evalTensor);
// they used to go as an empty float32 tensor, which the worker refused
// (test/integration/zoo-int-export.test.ts).
import { pipeline } from "../../../src/index.ts";

export default pipeline("trained-int", { batchSizes: [1, 4], iterations: 2, warmup: 1, threads: 1 })
  .train({ arch: "tiny-gpt", epochs: 1, stepsPerEpoch: 2, batchSize: 8, seed: 0 })
  .benchmark("python-torch");
