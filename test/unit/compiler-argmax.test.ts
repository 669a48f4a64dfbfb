/** ArgMax in the compiler: int64 indices of the reduced shape, resolved attributes, refusals naming the node. */
import { describe, expect, it } from "vitest";
import { CompileError } from "../../src/compiler/index.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, node } from "./compiler-onnx-builder.ts";

const INT32 = 6, BOOL = 9;

describe("ArgMax", () => {
  it("gives int64 indices with or without the reduced axis, from float and integer inputs", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 5, 3]], ["ids", ["N", 7], INT32]], outputs: ["a", "b"],
      nodes: [node("ArgMax", ["x"], ["a"], { axis: -2 }), node("ArgMax", ["ids"], ["b"], { axis: 1, keepdims: 0, select_last_index: 1 })],
    });
    expect(h.ops.map((o) => [o.op, o.attrs])).toEqual([
      ["ArgMax", { axis: 1, keepdims: 1, select_last_index: 0 }],
      ["ArgMax", { axis: 1, keepdims: 0, select_last_index: 1 }],
    ]);
    const t = (n: string) => h.tensors.find((x) => x.name === n)!;
    expect([t("a").shape, t("a").dtype, t("b").shape, t("b").dtype]).toEqual([[-1, 1, 3], "int64", [-1], "int64"]);
  });

  it.each([
    ["the batch axis", [["x", ["N", 3]]], { axis: 0 }, /ArgMax node "m": axis 0 of \[batch, 3\] is the batch/],
    ["a bool input", [["x", ["N", 3], BOOL]], { axis: 1 }, /input "x" is bool; memlane-rt compares float32, int64, int32/],
    ["select_last_index 2", [["x", ["N", 3]]], { axis: 1, select_last_index: 2 }, /attribute select_last_index is 2; ONNX allows 0 or 1/],
  ])("refuses %s", async (_, inputs, attrs, msg) => {
    const spec = { inputs, outputs: ["y"], nodes: [node("ArgMax", ["x"], ["y"], attrs, "m")] } as ModelSpec;
    const err = await compile(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CompileError);
    expect((err as Error).message).toMatch(msg);
  });
});
