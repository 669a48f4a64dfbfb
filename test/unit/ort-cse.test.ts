// ORT's common subexpression elimination as the pattern replay applies it (src/estimate/ort-cse.ts):
// a node computing what an earlier one computed goes, its readers read the earlier one's output.
import { describe, expect, it } from "vitest";
import type { ConstTensor, LNode } from "../../src/compiler/ir.ts";
import { ortCommonSubexpressions } from "../../src/estimate/ort-cse.ts";

const node = (op: string, inputs: string[], outputs: string[], attrs: LNode["attrs"] = {}): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs });
const scalar = (v: number): ConstTensor => ({ isFloat: true, dims: [1], data: Float64Array.of(v) });
// ORT's ConstantSharing merges equal initializers of up to 8 elements, not of 9 (ort-cse.ts).
const filled = (n: number, v: number): ConstTensor => ({ isFloat: true, dims: [n], data: new Float64Array(n).fill(v) });
const consts = new Map<string, ConstTensor>([
  ["zero0", scalar(0)], ["neg0", scalar(-1e4)], ["zero1", scalar(0)], ["neg1", scalar(-1e4)], ["neg2", scalar(-1e9)],
  ["w0", filled(9, 1)], ["w1", filled(9, 1)], ["v0", filled(8, 1)], ["v1", filled(8, 1)],
]);
const run = (nodes: LNode[], outputs: string[]) => ortCommonSubexpressions(nodes, outputs, (n) => consts.get(n)).map((n) => `${n.op}(${n.inputs.join(",")})->${n.outputs.join(",")}`);

describe("ORT's common subexpressions in the pattern replay", () => {
  it("keeps one of two layers' masks built with constants of equal value, and their readers read it", () => {
    // transformers' exports: each layer's Where(mask, 0, -10000) with its own scalar constants.
    const nodes = [
      node("Where", ["m", "zero0", "neg0"], ["b0"]), node("Add", ["s0", "b0"], ["a0"]),
      node("Where", ["m", "zero1", "neg1"], ["b1"]), node("Add", ["s1", "b1"], ["a1"]),
    ];
    expect(run(nodes, ["a1"])).toEqual(["Where(m,zero0,neg0)->b0", "Add(s0,b0)->a0", "Add(s1,b0)->a1"]);
  });

  it("keeps nodes that differ in a constant's value, an attribute, or a constant of more than 8 elements", () => {
    expect(run([node("Where", ["m", "zero0", "neg0"], ["b0"]), node("Where", ["m", "zero1", "neg2"], ["b1"])], [])).toHaveLength(2);
    expect(run([node("Softmax", ["x"], ["p0"], { axis: -1 }), node("Softmax", ["x"], ["p1"], { axis: 1 })], [])).toHaveLength(2);
    expect(run([node("Mul", ["x", "w0"], ["y0"]), node("Mul", ["x", "w1"], ["y1"])], [])).toHaveLength(2);
  });

  it("merges nodes whose constants of up to 8 elements are equal (BEiT's per-layer relative-position index)", () => {
    expect(run([node("Mul", ["x", "v0"], ["y0"]), node("Mul", ["x", "v1"], ["y1"])], [])).toEqual(["Mul(x,v0)->y0"]);
  });

  it("keeps a node whose output is a graph output, and follows a chain of merged values", () => {
    expect(run([node("Relu", ["x"], ["r0"]), node("Relu", ["x"], ["r1"])], ["r1"])).toHaveLength(2);
    // r1 is r0, so Sigmoid(r1) is Sigmoid(r0) too.
    expect(run([node("Relu", ["x"], ["r0"]), node("Sigmoid", ["r0"], ["s0"]), node("Relu", ["x"], ["r1"]), node("Sigmoid", ["r1"], ["s1"]), node("Add", ["s0", "s1"], ["y"])], ["y"]))
      .toEqual(["Relu(x)->r0", "Sigmoid(r0)->s0", "Add(s0,s0)->y"]);
  });
});
