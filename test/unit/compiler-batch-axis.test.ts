/**
 * The row ops with the batch off axis 0 (torch's seq-first layouts): Transpose moving the
 * batch, MatMul / Gemm / LayerNorm / Softmax / Concat on [S, batch, E], Gemm on rank 3, batched
 * MatMul with the batch on a later leading dim; GatherND and Max / Min; and what stays refused.
 */
import { describe, expect, it } from "vitest";
import { CompileError } from "../../src/compiler/index.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, init, node } from "./compiler-onnx-builder.ts";

const INT64 = 7;
const i64 = (name: string, dims: number[], data: number[]) => init(name, dims, data, "int64");

async function shapes(spec: ModelSpec, opts?: Parameters<typeof compile>[1]) {
  const { h } = await compile(spec, opts);
  const byName = new Map(h.tensors.map((t) => [t.name, t.shape]));
  return { h, shape: (n: string) => byName.get(n), ops: h.ops.map((o) => o.op) };
}

async function failure(spec: ModelSpec): Promise<string> {
  const err = await compile(spec).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CompileError);
  return (err as Error).message;
}

describe("the batch off axis 0", () => {
  it("runs a seq-first block: MatMul, LayerNorm, Softmax on [S, batch, E], Transpose to batch-first, rank-3 Gemm", async () => {
    const { shape, ops } = await shapes({
      inputs: [["x", [4, "N", 8]]], outputs: ["y"],
      inits: [init("w", [8, 6]), init("g", [6]), init("b", [6]), init("w2", [5, 6]), init("c", [5])],
      nodes: [
        node("MatMul", ["x", "w"], ["m"]),
        node("LayerNormalization", ["m", "g", "b"], ["ln"], { axis: -1 }),
        node("Softmax", ["ln"], ["sm"], { axis: -1 }),
        node("Transpose", ["sm"], ["t"], { perm: [1, 0, 2] }),
        node("Gemm", ["t", "w2", "c"], ["y"], { transB: 1 }),
      ],
    });
    expect(shape("m")).toEqual([4, -1, 6]);
    expect(shape("ln")).toEqual([4, -1, 6]);
    expect(shape("t")).toEqual([-1, 4, 6]);
    expect(shape("y")).toEqual([-1, 4, 5]);
    expect(ops).toEqual(["MatMul", "LayerNormalization", "Softmax", "Transpose", "Gemm"]);
  });

  it("multiplies activations whose batch sits on a later leading dim, and concatenates before it", async () => {
    const { shape } = await shapes({
      inputs: [["a", [2, "N", 3, 4]], ["b", [2, "N", 4, 5]]], outputs: ["y", "z"],
      nodes: [node("MatMul", ["a", "b"], ["y"]), node("Concat", ["a", "a"], ["z"], { axis: 0 })],
    });
    expect(shape("y")).toEqual([2, -1, 3, 5]);
    expect(shape("z")).toEqual([4, -1, 3, 4]);
  });

  it.each([
    ["a Softmax across the batch", { inputs: [["x", [4, "N", 8]]], nodes: [node("Softmax", ["x"], ["y"], { axis: 1 })] }, /across the batch/],
    ["a LayerNorm over the batch", { inputs: [["x", [4, "N", 8]]], inits: [init("g", [4, 1, 8])], nodes: [node("LayerNormalization", ["x", "g"], ["y"], { axis: 0 })] }, /normalise across the batch/],
    ["a MatMul with the batch on K", { inputs: [["x", [4, "N"]]], inits: [init("w", [3, 5])], nodes: [node("MatMul", ["x", "w"], ["y"])] }, /batch on its last axis/],
    ["a batched MatMul whose batches sit apart", { inputs: [["a", ["N", 2, 3, 4]], ["b", [2, "N", 4, 5]]], nodes: [node("MatMul", ["a", "b"], ["y"])] }, /broadcast|batch/],
    ["a Concat along the batch", { inputs: [["x", [4, "N", 8]]], nodes: [node("Concat", ["x", "x"], ["y"], { axis: 1 })] }, /along the batch/],
  ])("refuses %s", async (_, spec, msg) => {
    expect(await failure({ outputs: ["y"], ...spec } as ModelSpec)).toMatch(msg);
  });
});

describe("GatherND and Max / Min", () => {
  it("gathers tuples of run-time ids from a weight, and constant tuples from a seq-first activation", async () => {
    const { shape, ops } = await shapes({
      inputs: [["ids", ["N", 2], INT64], ["x", [4, "N", 3]]], outputs: ["e", "p"],
      inits: [init("table", [5, 6, 7]), i64("pick", [2, 1], [3, -1])],
      nodes: [node("GatherND", ["table", "ids"], ["e"]), node("GatherND", ["x", "pick"], ["p"])],
    });
    expect(shape("e")).toEqual([-1, 7]);
    expect(shape("p")).toEqual([2, -1, 3]);
    expect(ops).toEqual(["GatherND", "GatherND"]);
  });

  it("refuses batch_dims, constant tuples over the batch axis, and a tuple longer than the data's rank", async () => {
    const base = { inputs: [["x", ["N", 4, 3]]] as ModelSpec["inputs"], outputs: ["y"] };
    expect(await failure({ ...base, inits: [i64("i", [2, 1], [0, 1])], nodes: [node("GatherND", ["x", "i"], ["y"], { batch_dims: 1 })] })).toMatch(/batch_dims 1/);
    expect(await failure({ ...base, inits: [i64("i", [2, 1], [0, 1])], nodes: [node("GatherND", ["x", "i"], ["y"])] })).toMatch(/pick samples along the batch/);
    expect(await failure({ ...base, inits: [i64("i", [1, 4], [0, 0, 0, 0])], nodes: [node("GatherND", ["x", "i"], ["y"])] })).toMatch(/must end in a fixed dim of 1..3/);
  });

  it("computes Max and Min of two run-time tensors in their dtype, and refuses three inputs", async () => {
    const { h } = await compile({
      inputs: [["a", ["N", 3], INT64], ["b", [1, 3], INT64]], outputs: ["y"],
      nodes: [node("Max", ["a", "b"], ["m"]), node("Min", ["m", "a"], ["y"])],
    });
    expect(h.ops.map((o) => [o.op, h.tensors[o.outputs[0]!]!.dtype])).toEqual([["Max", "int64"], ["Min", "int64"]]);
    expect(await failure({ inputs: [["a", ["N", 3]]], outputs: ["y"], nodes: [node("Max", ["a", "a", "a"], ["y"])] })).toMatch(/exactly two/);
  });
});
