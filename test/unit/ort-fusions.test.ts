// ORT's fusions as the pattern replay applies them (src/estimate/ort-fusions.ts): each rule
// fuses its pair, and none fuses away a tensor the caller gets as a graph output.
import { describe, expect, it } from "vitest";
import type { LNode } from "../../src/compiler/ir.ts";
import { CONV_SUM, ortFusions } from "../../src/estimate/ort-fusions.ts";

const node = (op: string, inputs: string[], outputs: string[]): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs: {} });
const ops = (ns: LNode[]) => ns.map((n) => `${n.op}->${n.outputs.join(",")}`);

describe("ORT's fusions in the pattern replay", () => {
  it("folds an activation into its Conv, a residual Add into the Conv, and x * Sigmoid(x) into one node", () => {
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("HardSwish", ["c"], ["y"])], ["y"]))).toEqual(["Conv->y"]);
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "r"], ["y"])], ["y"]))).toEqual([`${CONV_SUM}->y`]);
    expect(ops(ortFusions([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])], ["y"]))).toEqual(["ort:QuickGelu->y"]);
  });

  it("fuses nothing whose intermediate tensor is a graph output", () => {
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("HardSwish", ["c"], ["y"])], ["c", "y"]))).toEqual(["Conv->c", "HardSwish->y"]);
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "r"], ["y"])], ["y", "c"]))).toEqual(["Conv->c", "Add->y"]);
    expect(ops(ortFusions([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])], ["s", "y"]))).toEqual(["Sigmoid->s", "Mul->y"]);
  });
});
