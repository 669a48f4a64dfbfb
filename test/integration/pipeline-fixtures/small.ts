// A small but complete pipeline for the end-to-end test: every stage kind, few iterations.
import { pipeline } from "../../../src/index.ts";

export default pipeline("small", { batchSizes: [1, 8], iterations: 5, warmup: 1 })
  .train({ arch: "digits-cnn", epochs: 2, seed: 1 })
  .export()
  .benchmark("python-torch")
  .benchmark("python-ort")
  .benchmark("node-ort")
  .benchmark("native")
  .checkpointLoad({ methods: ["safetensors", "torch.load"] })
  .python("stats", async (py, ctx) => {
    const held = ctx.heldout()!;
    await py.run("import numpy as np\nn = len(np.asarray(labels))\npid = __import__('os').getpid()", { labels: Array.from(held.labels!, Number) });
    return { n: await py.value<number>("n"), pid: await py.value<number>("pid") };
  }, { after: ["bench:python-ort"] });
