// ORT's NoopElimination as the pattern replay applies it (src/estimate/ort-noop-elimination.ts):
// which arithmetic goes, which stays, and what its readers read instead.
import { describe, expect, it } from "vitest";
import type { ConstTensor, LNode } from "../../src/compiler/ir.ts";
import { ortNoopElimination } from "../../src/estimate/ort-noop-elimination.ts";

const node = (op: string, inputs: string[], outputs: string[]): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs: {} });
const cst = (dims: number[], data: number[], extra: Partial<ConstTensor> = {}): ConstTensor => ({ isFloat: true, dims, data: Float32Array.from(data), ...extra });
const CONSTS: Record<string, ConstTensor> = {
  zero: cst([], [0]),
  negzero: cst([], [-0]),
  one: cst([1], [1]),
  two: cst([], [2]),
  zeros4: cst([1, 4, 1, 1], [0, 0, 0, 0]),
  empty: cst([0], []),
  one5d: cst([1, 1, 1, 1, 1], [1]),
  izero: { isFloat: false, dims: [], data: Float64Array.from([0]), dtype: "int64" },
  bzero: { isFloat: false, dims: [], data: Float64Array.from([0]), dtype: "bool" },
};
const values = { constOf: (n: string) => CONSTS[n], rankOf: (n: string) => (n === "unranked" ? undefined : 4) };
/** What's left of `x OP c` read by a Relu: the ops, and what the Relu reads. */
const after = (op: string, a: string, b: string, outputs: string[] = ["r"]) => {
  const { nodes } = ortNoopElimination([node(op, [a, b], ["t"]), node("Relu", ["t"], ["r"])], new Set(outputs), values);
  return { ops: nodes.map((n) => n.op).join(","), reads: nodes.at(-1)!.inputs[0] };
};

describe("ORT's NoopElimination in the pattern replay", () => {
  it("removes x + 0, 0 + x, x - 0, x * 1, 1 * x and x / 1, the readers reading x", () => {
    for (const [op, a, b] of [["Add", "x", "zero"], ["Add", "zero", "x"], ["Sub", "x", "zero"], ["Mul", "x", "one"], ["Mul", "one", "x"], ["Div", "x", "one"]] as const)
      expect(after(op, a, b), `${a} ${op} ${b}`).toEqual({ ops: "Relu", reads: "x" });
  });

  it("takes -0 as zero, an integer zero too, and an empty constant whatever its type", () => {
    expect(after("Add", "x", "negzero")).toEqual({ ops: "Relu", reads: "x" });
    expect(after("Add", "x", "izero")).toEqual({ ops: "Relu", reads: "x" });
    expect(after("Add", "x", "empty")).toEqual({ ops: "Relu", reads: "x" });
  });

  it("keeps the others: a constant first in Sub or Div, more than one element, another value, a bool, a higher rank, an unknown rank, two tensors, a graph output", () => {
    const kept = { ops: "Sub,Relu", reads: "t" };
    expect(after("Sub", "zero", "x")).toEqual(kept);
    expect(after("Div", "one", "x")).toEqual({ ops: "Div,Relu", reads: "t" });
    expect(after("Add", "x", "zeros4")).toEqual({ ops: "Add,Relu", reads: "t" });
    expect(after("Mul", "x", "two")).toEqual({ ops: "Mul,Relu", reads: "t" });
    expect(after("Add", "x", "bzero")).toEqual({ ops: "Add,Relu", reads: "t" });
    expect(after("Mul", "x", "one5d")).toEqual({ ops: "Mul,Relu", reads: "t" });
    expect(after("Add", "unranked", "zero")).toEqual({ ops: "Add,Relu", reads: "t" });
    expect(after("Add", "x", "y")).toEqual({ ops: "Add,Relu", reads: "t" });
    const { nodes } = ortNoopElimination([node("Add", ["x", "zero"], ["t"])], new Set(["t"]), values);
    expect(nodes.map((n) => n.op)).toEqual(["Add"]);
  });

  it("follows a chain of them, and says which readers it gave a new input", () => {
    const chain = [node("Add", ["x", "zero"], ["a"]), node("Mul", ["a", "one"], ["b"]), node("Relu", ["b"], ["r"])];
    const { nodes, renamed } = ortNoopElimination(chain, new Set(["r"]), values);
    expect(nodes.map((n) => `${n.op}(${n.inputs.join(",")})`)).toEqual(["Relu(x)"]);
    expect(renamed.get(chain[2]!)).toBe(nodes[0]);
  });
});
