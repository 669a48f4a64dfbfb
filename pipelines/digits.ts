/**
 * The main job: train a small CNN on sklearn's digits, export it to ONNX, deploy it on every
 * runtime (each in its own process), compare
 * checkpoint loading three ways (on resnet18's ~45 MiB), and compute a confusion matrix with
 * numpy from TypeScript.
 *
 *   npm run demo        (= memlane run pipelines/digits.ts)
 */
import { pipeline } from "../src/index.ts";

export default pipeline("digits", { batchSizes: [1, 64], iterations: 50, warmup: 5, threads: 1 })
  .train({ arch: "digits-cnn", epochs: 12, seed: 0, minAccuracy: 0.95 })
  .export()
  .benchmark("python-torch")
  .benchmark("python-ort")
  .benchmark("node-ort")
  // Compiled with compileOnnx and run by memlane-rt; reported as unavailable where it is not built.
  .benchmark("native")
  // torch.load vs torch.load(mmap=True) vs safetensors on a ~45 MiB checkpoint (resnet18, seeded
  // random weights): the trained CNN's 0.15 MiB would vanish in the noise.
  .checkpointLoad({ zoo: "resnet18", seed: 0 })
  .python(
    "confusion-matrix",
    async (py, ctx) => {
      const held = ctx.heldout();
      const ort = ctx.benchmark("python-ort");
      if (!held?.labels || !ort) throw new Error("needs the held-out labels and the python-ort outputs");
      // Raw little-endian files in the run directory: numpy reads them directly.
      const labels = await ctx.writeArtifact("labels.i64", new Uint8Array(held.labels.buffer));
      const outputs = await ctx.writeArtifact("confusion-outputs.f32", new Uint8Array(ort.outputs.buffer, ort.outputs.byteOffset, ort.outputs.byteLength));
      await py.run(
        `
import numpy as np
y = np.fromfile(labels, dtype="<i8")
pred = np.fromfile(outputs, dtype="<f4").reshape(len(y), -1).argmax(1)
cm = np.zeros((10, 10), dtype=np.int64)
np.add.at(cm, (y, pred), 1)
recall = np.diag(cm) / np.maximum(cm.sum(1), 1)
`,
        { labels, outputs },
      );
      const matrix = await py.value<number[][]>("cm.tolist()");
      const accuracy = await py.value<number>("float(np.trace(cm) / cm.sum())");
      const worst = await py.value<number[]>("[int(i) for i in np.argsort(recall)[:3]]");
      ctx.log(`confusion matrix (rows: label, columns: python-ort prediction), accuracy ${accuracy.toFixed(4)}:`);
      ctx.log(`      ${Array.from({ length: 10 }, (_, i) => String(i).padStart(3)).join("")}`);
      matrix.forEach((row, i) => ctx.log(`   ${i}  ${row.map((v) => String(v).padStart(3)).join("")}`));
      ctx.log(`hardest digits: ${worst.join(", ")}`);
      return { matrix, accuracy, hardest: worst };
    },
    { after: ["bench:python-ort"] },
  );
