/**
 * The compiler on real ONNX files exported by torch (test/fixtures/onnx/make_models.py,
 * generated once and cached by script hash in the OS temp directory).
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompileError, type CompileSummary, type PlanFile, checkPlanArena, compileOnnx, readPlan, weightData } from "../../src/compiler/index.ts";
import { type ModelEntry, ensureModels } from "../fixtures/onnx/models.ts";

let dir = "";
let manifest: Record<string, ModelEntry> = {};
const out = mkdtempSync(join(tmpdir(), "memlane-compiler-models-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const compiled = new Map<string, { s: CompileSummary; plan: PlanFile }>();

async function get(name: string) {
  let c = compiled.get(name);
  if (!c) {
    const path = join(out, `${name}.mlplan`);
    const s = await compileOnnx(join(dir, manifest[name]!.onnx), path);
    c = { s, plan: readPlan(path) };
    compiled.set(name, c);
  }
  return c;
}

// Every model the fixture script exports that memlane can compile; all reach the bound.
const MODELS = [
  "digits-cnn", "mlp", "mlp-external", "resnet-mini", "grouped-dilated", "pool-concat", "softmax",
  "transpose-reshape", "gelu-erf", "gelu-20", "leakyrelu", "matmul", "sub-div", "bn-standalone",
  "digits-cnn-dynamo", "resnet-mini-dynamo", "lstm",
];

beforeAll(() => {
  ({ dir, manifest } = ensureModels());
}, 300_000);

describe("compiler on exported models", () => {
  it("the fixture list matches the generated manifest", () => {
    expect(Object.keys(manifest).filter((k) => manifest[k]!.compiles).sort()).toEqual([...MODELS].sort());
  });

  it.each(MODELS)("%s: input/output shapes, no BatchNormalization/Identity/shape ops left, arena check passes", async (name) => {
    const { s, plan } = await get(name);
    const m = manifest[name]!;
    expect(s.inputs).toEqual([{ name: "input", shape: m.inputShape, dtype: "float32", batchAxis: 0 }]);
    expect(s.outputs).toEqual([{ name: "output", shape: m.outputShape, dtype: "float32", batchAxis: 0 }]);
    const ops = new Set(plan.header.ops.map((o) => o.op));
    for (const gone of ["BatchNormalization", "Identity", "Dropout", "Shape", "Gather", "Constant", "Unsqueeze", "Cast"]) expect(ops.has(gone)).toBe(false);
    const check = checkPlanArena(plan.header);
    expect(check.problems).toEqual([]);
    expect(check.lowerBound).toBe(s.lowerBoundPerSample);
    expect(s.arenaBytesPerSample).toBeGreaterThanOrEqual(s.lowerBoundPerSample);
    for (const t of plan.header.tensors) if (t.kind !== "weight") expect(t.shape[0]).toBe(-1);
  });

  it.each(MODELS)("%s: arena within 1.05x of the lower bound (reached on every fixture model)", async (name) => {
    const { s } = await get(name);
    expect(s.ratio).toBeLessThanOrEqual(1.05);
  });

  it("digits-cnn: the view(x.size(0), -1) chain folds into Reshape [-1, 64]; Relu fused into Conv and Gemm", async () => {
    const { s, plan } = await get("digits-cnn");
    expect(s.opCounts).toEqual({ Conv: 2, MaxPool: 2, Reshape: 1, Gemm: 2 });
    expect(plan.header.ops.find((o) => o.op === "Reshape")!.attrs.shape).toEqual([-1, 64]);
    expect(plan.header.ops.filter((o) => o.attrs.activation === "relu")).toHaveLength(3);
  });

  it("resnet-mini: every BatchNormalization folded into its Conv; residual Adds and the pool stay", async () => {
    const { s } = await get("resnet-mini");
    expect(s.opCounts).toMatchObject({ Conv: 8, Add: 3, GlobalAveragePool: 1, Flatten: 1, Gemm: 1 });
    expect(s.opCounts.BatchNormalization).toBeUndefined();
  });

  it("resnet-mini-dynamo: the dynamo exporter's ReduceMean becomes GlobalAveragePool", async () => {
    const { s } = await get("resnet-mini-dynamo");
    expect(s.opCounts).toMatchObject({ Conv: 8, Add: 3, GlobalAveragePool: 1, Reshape: 1, Gemm: 1 });
    expect(s.opCounts.ReduceMean).toBeUndefined();
  });

  it("bn-standalone: a BatchNormalization with no Conv before it becomes Mul + Add", async () => {
    const { s } = await get("bn-standalone");
    expect(s.opCounts).toEqual({ Mul: 1, Add: 2, Conv: 1 });
  });

  it("gelu-erf's opset-17 Erf chain is fused into one Gelu; grouped-dilated keeps group and dilation", async () => {
    const erf = await get("gelu-erf");
    expect(erf.s.opCounts).toMatchObject({ Gelu: 1 });
    expect(erf.s.opCounts.Erf).toBeUndefined();
    expect(erf.plan.header.ops.find((o) => o.op === "Gelu")!.attrs.approximate).toBe("none");
    const gelu = (await get("gelu-20")).plan.header.ops.filter((o) => o.op === "Gelu");
    expect(gelu.map((o) => o.attrs.approximate)).toEqual(["none", "tanh"]);
    const ops = (await get("grouped-dilated")).plan.header.ops;
    expect(ops[0]!.attrs).toMatchObject({ group: 2, dilations: [2, 2], pads: [2, 2, 2, 2], activation: "relu" });
    expect(ops[1]!.attrs).toMatchObject({ group: 16, strides: [2, 2] });
  });

  it("pool-concat resolves count_include_pad and ceil_mode", async () => {
    const pools = (await get("pool-concat")).plan.header.ops.filter((o) => o.op === "AveragePool");
    expect(pools.map((p) => p.attrs.countIncludePad)).toEqual([1, 0, 1]); // torch defaults to count_include_pad=True
    expect(pools[2]!.attrs.ceilMode).toBe(1);
  });

  it("mlp-external (weights in an external data file) compiles to the same weights as mlp", async () => {
    const a = await get("mlp"), b = await get("mlp-external");
    expect(b.s.weightsBytes).toBe(a.s.weightsBytes);
    const ws = (p: PlanFile) => p.header.tensors.map((t, i) => [t, i] as const).filter(([t]) => t.kind === "weight").map(([, i]) => Array.from(weightData(p, i)));
    expect(ws(b.plan)).toEqual(ws(a.plan));
  });

  it("an ONNX with an RNN fails naming the op, the node and the supported list, and leaves no file", async () => {
    const plan = join(out, "rnn.mlplan");
    const err = await compileOnnx(join(dir, manifest.rnn!.onnx), plan).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CompileError);
    expect((err as Error).message).toMatch(/rnn\.onnx: op RNN \(node "[^"]+"\) is not supported; memlane-rt supports: Conv, Gemm/);
    expect(existsSync(plan)).toBe(false);
    expect(readdirSync(out).filter((f) => f.includes("rnn"))).toEqual([]);
  });
});
