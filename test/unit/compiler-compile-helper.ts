/** Compile a hand-built model to a plan in a temp dir, read it back and check its arena. */
import { join } from "node:path";
import { expect } from "vitest";
import { type CompileOptions, checkPlanArena, compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { type ModelSpec, tempDir, writeModel } from "./compiler-onnx-builder.ts";

export async function compile(spec: ModelSpec, opts?: CompileOptions) {
  const dir = tempDir();
  const onnxPath = writeModel(spec, "m", dir);
  const planPath = join(dir, "m.mlplan");
  const summary = await compileOnnx(onnxPath, planPath, opts);
  const plan = readPlan(planPath);
  expect(checkPlanArena(plan.header).problems).toEqual([]);
  return { summary, plan, h: plan.header };
}
