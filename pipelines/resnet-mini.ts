/**
 * Deployment only: the resnet-mini zoo model (CIFAR-sized, random weights from a seed, no
 * training) exported to ONNX and compared across runtimes. python-torch rebuilds the same
 * weights from the seed, so it is the numerical reference.
 *
 *   memlane run pipelines/resnet-mini.ts
 */
import { pipeline } from "../src/index.ts";

export default pipeline("resnet-mini", { batchSizes: [1, 64], iterations: 20, warmup: 3, threads: 1 })
  .export({ zoo: "resnet-mini", seed: 0, evalSamples: 128 })
  .benchmark("python-torch")
  .benchmark("python-ort")
  .benchmark("node-ort")
  .benchmark("native");
