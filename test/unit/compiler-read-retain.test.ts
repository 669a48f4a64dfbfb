// readPlan keeps nothing of the file it read once its result is dropped: msgpackr holds the
// last buffer it decoded, and decoding the header as a view of the file made it hold the whole
// plan (resnet50's 100 MB stayed in the orchestrator, and node-ort, which ran in that process
// until 2026-12-02, measured it at every phase).
import { rmSync } from "node:fs";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { expect, it } from "vitest";
import { compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { init, node, tempDir, writeModel } from "./compiler-onnx-builder.ts";

// A context created after the flag is set gets `gc`. Twice: V8 frees dead ArrayBuffers' backing
// stores on a background sweeper, and the next collection completes that sweep.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const collectGarbage = (): void => {
  gc();
  gc();
};

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
