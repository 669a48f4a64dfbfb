// readPlan keeps nothing of the file it read once its result is dropped: msgpackr holds the
// last buffer it decoded, and decoding the header as a view of the file made it hold the whole
// plan (resnet50's 100 MB stayed in the orchestrator, and node-ort, which runs in that process,
// measured it at every phase).
import { rmSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { collectGarbage } from "../../src/workers/collect-garbage.ts";
import { init, node, tempDir, writeModel } from "./compiler-onnx-builder.ts";

it("readPlan keeps no part of the plan file once its result is gone", async () => {
  const dir = tempDir();
  try {
    // 1024 x 4096 floats: a 16 MiB blob.
    const w = init("w", [1024, 4096], new Array(1024 * 4096).fill(0.5));
    const onnx = writeModel({ inputs: [["x", ["N", 1024]]], outputs: ["y"], nodes: [node("MatMul", ["x", "w"], ["y"])], inits: [w] }, "m", dir);
    const plan = join(dir, "m.mlplan");
    await compileOnnx(onnx, plan, { verify: false });
    collectGarbage();
    const before = process.memoryUsage().arrayBuffers;
    const ops = ((p: string) => readPlan(p).header.ops.length)(plan);
    expect(ops).toBe(1);
    collectGarbage();
    expect((process.memoryUsage().arrayBuffers - before) / 2 ** 20).toBeLessThan(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
