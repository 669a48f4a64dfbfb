/**
 * What transformers' attention-mask code exports, lowered for memlane-rt: IsNaN as
 * Not(Equal(x, x)), Flatten of a bool mask as a Reshape, and a Gather whose run-time indices
 * address a flattened [k·batch] table (batch_idx * seq + kv_idx).
 */
import { describe, expect, it } from "vitest";
import { compile } from "./compiler-compile-helper.ts";
import { init, node } from "./compiler-onnx-builder.ts";

const INT64 = 7;
const BOOL = 9;
const i64 = (name: string, dims: number[], data: number[]) => init(name, dims, data, "int64");

describe("attention-mask ops", () => {
  it("IsNaN becomes Not(Equal(x, x)), exact under IEEE 754", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      nodes: [node("Softmax", ["x"], ["p"], { axis: -1 }), node("IsNaN", ["p"], ["nan"], {}, "guard"), node("Not", ["nan"], ["y"])],
    });
    const ops = h.ops.map((o) => o.op);
    expect(ops).toEqual(["Softmax", "Equal", "Not", "Not"]);
    const eq = h.ops[1]!;
    expect(eq.inputs[0]).toBe(eq.inputs[1]);
    expect(h.tensors[h.ops[2]!.outputs[0]!]).toMatchObject({ dtype: "bool" });
  });

  it("Flatten of a bool tensor is a Reshape that keeps its dtype and its batch", async () => {
    const { h } = await compile({
      inputs: [["m", ["N", 3, 5], BOOL]], outputs: ["y"],
      inits: [i64("back", [3], [-1, 3, 5])],
      nodes: [node("Flatten", ["m"], ["f"], { axis: 0 }, "flat"), node("Not", ["f"], ["nf"]), node("Reshape", ["nf", "back"], ["y"])],
    });
    expect(h.ops.map((o) => o.op)).toEqual(["Reshape", "Not", "Reshape"]);
    expect(h.tensors[h.ops[0]!.outputs[0]!]).toMatchObject({ dtype: "bool", shape: [1, -15] });
  });

  it("a Gather of run-time indices from a flattened [k·batch] table takes the indices' batch", async () => {
    const { h } = await compile({
      inputs: [["mask", ["N", 6], INT64], ["idx", ["N", 6], INT64]], outputs: ["y"],
      inits: [i64("flat", [1], [-1])],
      nodes: [node("Reshape", ["mask", "flat"], ["table"]), node("Gather", ["table", "idx"], ["y"], { axis: 0 }, "pick")],
    });
    const g = h.ops.find((o) => o.op === "Gather")!;
    expect(h.tensors[g.inputs[0]!]!.shape).toEqual([-6]);
    expect(h.tensors[g.outputs[0]!]).toMatchObject({ dtype: "int64", shape: [-1, 6] });
  });

  it("a bool initializer stays bool: the Where condition transformers' dynamo export expands from one", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 2, 3]]], outputs: ["y"],
      inits: [init("keep", [1, 2, 3], [1, 0, 1, 1, 1, 0], "bool"), init("zero", [1], [0])],
      nodes: [node("Where", ["keep", "x", "zero"], ["y"], {}, "masked")],
    });
    const w = h.ops.find((o) => o.op === "Where")!;
    expect(h.tensors[w.inputs[0]!]).toMatchObject({ dtype: "bool", kind: "weight", bytes: 6 });
  });

  it("still refuses two run-time batches that would multiply", async () => {
    const err = await compile({
      inputs: [["d", ["N", 4, 3]], ["idx", ["N", 2], INT64]], outputs: ["y"],
      nodes: [node("Gather", ["d", "idx"], ["y"], { axis: 1 }, "both")],
    }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/Gather node "both".*their batches would multiply/);
  });
});
