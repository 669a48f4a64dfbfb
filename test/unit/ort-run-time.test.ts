// Which values ORT computes in every request that memlane's compiler folds (src/estimate/ort-run-time.ts).
import { describe, expect, it } from "vitest";
import type { ConstTensor, Node } from "../../src/compiler/ir.ts";
import type { LNode } from "../../src/compiler/ir.ts";
import { ortRunTimeFolds, runTimeShapesOrtInfers, withRunTimeReads } from "../../src/estimate/ort-run-time.ts";

const node = (opType: string, inputs: string[], outputs: string[]): Node => ({ opType, name: outputs[0]!, inputs, outputs, attrs: new Map() });
const ints = (...dims: number[]): ConstTensor => ({ isFloat: false, dims, data: new Float64Array(dims.reduce((a, b) => a * b, 1)) });
const floats = (...dims: number[]): ConstTensor => ({ isFloat: true, dims, data: new Float64Array(dims.reduce((a, b) => a * b, 1)) });

// x [N, 4, 14, 14] (N symbolic), w an initializer [8, 4]; the compiler folded every value below but y.
const shapes = new Map<string, number[]>([["x", [-1, 4, 14, 14]], ["w", [8, 4]], ["y", [-1, 4, 14, 14]]]);
const folded = new Map<string, ConstTensor>([
  ["s", ints(4)], ["hw", ints(1)], ["r", ints(196)], ["idx", ints(196, 196)], ["bias", floats(196, 196)],
  ["ws", ints(2)], ["wr", ints(8)], ["k", ints(1)], ["kr", ints(3)], ["noise", floats(4)],
]);
const nodes = [
  node("Shape", ["x"], ["s"]), node("ReduceProd", ["s"], ["hw"]), node("Range", ["zero", "hw", "one"], ["r"]),
  node("Add", ["r", "r"], ["idx"]), node("Gather", ["table", "idx"], ["bias"]),
  node("Shape", ["w"], ["ws"]), node("Range", ["zero", "eight", "one"], ["wr"]),
  node("Constant", [], ["k"]), node("Range", ["zero", "k", "one"], ["kr"]),
  node("RandomNormalLike", ["w"], ["noise"]),
  node("Add", ["x", "bias"], ["y"]),
];
const consts = new Map<string, ConstTensor>([["zero", ints(1)], ["one", ints(1)], ["eight", ints(1)], ["table", floats(391)], ["w", floats(8, 4)]]);

describe("values ORT computes at run time that the compiler folds", () => {
  const inputs = [{ name: "x", dims: ["N", 4, 14, 14], elemType: 1 }];
  const r = ortRunTimeFolds({ consts, outputs: ["y"], inputs }, nodes, folded, (n) => shapes.get(n));

  it("runs what is computed from the shape of a tensor with a symbolic dim, with its bytes", () => {
    expect(r.nodes.map((n) => n.name)).toEqual(["s", "hw", "r", "idx", "bias", "noise"]);
    expect(r.bytes.get("idx")).toBe(196 * 196 * 8);
    expect(r.bytes.get("bias")).toBe(196 * 196 * 4);
  });

  it("folds what ORT folds: a Shape of a fully known shape, initializers, Constants, and what they compute", () => {
    for (const v of ["ws", "wr", "k", "kr"]) expect(r.bytes.has(v)).toBe(false);
  });

  it("never folds a random op, even of an initializer, and leaves a node the compiler did not fold to the compiler's graph", () => {
    expect(r.bytes.has("noise")).toBe(true);
    expect(r.bytes.has("y")).toBe(false);
  });

  it("knows a shape the file declares all in numbers", () => {
    const declared = ortRunTimeFolds({ consts, outputs: ["y"], inputs, declaredShapes: new Map([["h", [2, 4, 14, 14]]]) }, [node("Shape", ["h"], ["s"])], folded, () => undefined);
    expect(declared.nodes).toEqual([]);
  });

  it("runs a Shape of a graph input whose only symbolic dim is not the batch (a sequence the compiler fills in)", () => {
    const seq = [{ name: "ids", dims: [1, "seq"], elemType: 7 }];
    const r2 = ortRunTimeFolds({ consts, outputs: ["y"], inputs: seq }, [node("Shape", ["ids"], ["s"]), node("Shape", ["w"], ["ws"])], folded, () => [1, 128]);
    expect(r2.nodes.map((n) => n.name)).toEqual(["s"]);
  });

  it("trusts the compiler's batch-free shape of a value only where no graph input has a symbolic dim besides the batch", () => {
    const seq = [{ name: "ids", dims: ["N", "seq"], elemType: 7 }];
    const pos = [node("Shape", ["p"], ["s"])];
    expect(ortRunTimeFolds({ consts, outputs: ["y"], inputs: seq }, pos, folded, () => [1, 128]).nodes.map((n) => n.name)).toEqual(["s"]);
    expect(ortRunTimeFolds({ consts, outputs: ["y"], inputs }, pos, folded, () => [1, 128]).nodes).toEqual([]);
  });
});

describe("what ORT knows of its run-time values", () => {
  // x [N, 8, 4, 4]: its grid's height read by Shape -> Gather, Unsqueezed and Concatenated into a
  // Reshape's shape (the compiler folds all of it into the Reshape), and a Range of that height.
  const grid = [
    node("Shape", ["x"], ["s"]), node("Gather", ["s", "two"], ["h"]), node("Unsqueeze", ["h", "axes"], ["hu"]),
    node("Concat", ["hu", "minus1"], ["shape"]), node("Range", ["zero", "h", "one"], ["r"]),
    node("Reshape", ["x", "shape"], ["y"]),
  ];
  const gridFolded = new Map<string, ConstTensor>([["s", ints(4)], ["h", ints()], ["hu", ints(1)], ["shape", ints(2)], ["r", ints(4)]]);
  const gridConsts = new Map<string, ConstTensor>([["two", ints()], ["axes", ints(1)], ["minus1", ints(1)], ["zero", ints()], ["one", ints()]]);
  const rt = ortRunTimeFolds({ consts: gridConsts, outputs: ["y"], inputs: [{ name: "x", dims: ["N", 8, 4, 4], elemType: 1 }] }, grid, gridFolded, () => undefined);

  it("keeps a shape value until the node that reads it, where the compiler's lowered node no longer does", () => {
    const lowered: LNode[] = [{ op: "Reshape", name: "y", inputs: ["x"], outputs: ["y"], attrs: { shape: [-1, 32] } }];
    expect(withRunTimeReads(lowered, grid, rt)[0]!.inputs).toEqual(["x", "shape"]);
    // a node that reads nothing computed at run time is left as it is
    expect(withRunTimeReads([{ op: "Relu", name: "z", inputs: ["x"], outputs: ["z"], attrs: {} }], grid, rt)[0]!.inputs).toEqual(["x"]);
  });

  it("knows the shapes shape inference gives from shapes alone (Shape, Gather, Unsqueeze, Concat), not a Range's", () => {
    const known = runTimeShapesOrtInfers(rt, (n) => gridConsts.has(n));
    expect([...known].sort()).toEqual(["h", "hu", "s", "shape"]);
    // an Unsqueeze whose axes are computed at run time: its output's rank is not known
    const computedAxes = { ...rt, nodes: rt.nodes.map((n) => (n.op === "Unsqueeze" ? { ...n, inputs: ["h", "s"] } : n)) };
    expect(runTimeShapesOrtInfers(computedAxes, (n) => gridConsts.has(n)).has("hu")).toBe(false);
  });
});
