/**
 * Both plan readers refuse a plan that computes nothing with the same words: the TypeScript
 * reader (src/compiler/plan-dataflow.ts) and memlane-rt's (plan_reader.cc check_dataflow),
 * the latter through memlane-bench, which loads a plan and prints the runtime's error.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileOnnx, parsePlan, readPlan } from "../../src/compiler/index.ts";
import { serialisePlan } from "../../src/compiler/write.ts";
import type { Built } from "../../src/compiler/build.ts";
import { init, node, tempDir, writeModel } from "../unit/compiler-onnx-builder.ts";
import { ROOT } from "./pipeline-helpers.ts";

const bench = [join(ROOT, "native/build/runtime/memlane-bench"), join(ROOT, "native/build/memlane-bench")].find((p) => existsSync(p));
if (!bench) console.log("[plan-dataflow] memlane-rt side skipped: memlane-bench is not built (npm run bootstrap builds it)");

describe("plan dataflow: the same refusal in TypeScript and memlane-rt", () => {
  it("ops: [] and an output no op writes", async () => {
    const dir = tempDir();
    const onnx = writeModel({
      inputs: [["x", ["N", 3]]], outputs: ["y"],
      inits: [init("w", [3, 5], Array.from({ length: 15 }, (_, i) => i)), init("b", [5], [1, 2, 3, 4, 5])],
      nodes: [node("Gemm", ["x", "w", "b"], ["g"]), node("Relu", ["g"], ["r"]), node("Sigmoid", ["r"], ["y"])],
    }, "m", dir);
    const good = join(dir, "m.mlplan");
    await compileOnnx(onnx, good);
    const plan = readPlan(good);
    const variants: Array<[string, (h: Built["header"]) => void, RegExp]> = [
      ["no-ops", (h) => (h.ops = []), /^ops: expected at least one op, found none \(an empty list\)$/],
      ["unwritten-output", (h) => void h.ops.pop(), /^outputs\[0\] \(y\): expected a tensor written by an op or a plan input, found tensor \d+, which nothing writes$/],
    ];
    for (const [name, mutate, words] of variants) {
      const header = structuredClone(plan.header);
      mutate(header);
      const { chunks } = serialisePlan({ header, weights: [{ offset: 0, data: Uint8Array.from(plan.blob) }], blobBytes: plan.blob.length });
      const file = join(dir, `${name}.mlplan`);
      writeFileSync(file, Buffer.concat(chunks));
      let ts = "";
      try {
        parsePlan(readFileSync(file), file);
      } catch (e) {
        ts = (e as Error).message;
      }
      const tsWords = ts.slice(`${file}: invalid plan: `.length);
      expect(tsWords, name).toMatch(words);
      if (!bench) continue;
      const r = spawnSync(bench, [file, "1", "1"], { encoding: "utf8" });
      expect(r.status, `${name}: ${r.stderr}`).not.toBe(0);
      const native = /error \d+: (.*)$/m.exec(r.stderr)?.[1] ?? r.stderr;
      expect(native.slice(`${file}: `.length), name).toBe(tsWords);
    }
  });
});
