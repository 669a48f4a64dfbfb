/** Compile a hand-built model to a plan in a temp dir, read it back and check its arena. */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { type CompileOptions, checkPlanArena, compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { type ModelSpec, tempDir, writeModel } from "./compiler-onnx-builder.ts";

export async function compile(spec: ModelSpec, opts?: CompileOptions) {
  const dir = tempDir();
  const onnxPath = writeModel(spec, "m", dir);
  const planPath = join(dir, "m.mlplan");
  let summary, plan;
  try {
    summary = await compileOnnx(onnxPath, planPath, opts);
    plan = readPlan(planPath);  // read into memory: the temp dir can go
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  expect(checkPlanArena(plan.header).problems).toEqual([]);
  return { summary, plan, h: plan.header };
}
