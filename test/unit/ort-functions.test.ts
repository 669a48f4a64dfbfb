// The ONNX function ops ORT's CPU runs as their bodies (src/estimate/ort-functions.ts): which
// HardSwish stays one node (a blocked 2-D conv takes it) and which becomes HardSigmoid and Mul.
// The float16 case is in ort-fp16.test.ts; ORT's own block for a 1-D net in the estimate bench.
import { describe, expect, it } from "vitest";
import type { ConstTensor, Graph, Node } from "../../src/compiler/ir.ts";
import { withOrtFunctionBodies } from "../../src/estimate/ort-functions.ts";

const tensor = (dims: number[]): ConstTensor => ({ isFloat: true, dims, data: new Float32Array(dims.reduce((a, b) => a * b, 1)), fileType: 1 });
const node = (opType: string, inputs: string[], outputs: string[]): Node => ({ opType, name: outputs[0]!, inputs, outputs, attrs: new Map() });
const graph = (consts: Record<string, number[]>, nodes: Node[]): Graph => ({
  file: "f.onnx", opset: 17, inputs: [{ name: "x", dims: ["N", 16, 8, 8], elemType: 1 }], outputs: ["y"],
  consts: new Map(Object.entries(consts).map(([k, d]) => [k, tensor(d)])), nodes,
});
const ops = (g: Graph) => g.nodes.map((n) => `${n.opType}(${n.inputs.join(",")})->${n.outputs.join(",")}`);

describe("HardSwish as ORT's CPU runs it", () => {
  it("stays one node after a 2-D conv ORT blocks, which takes the HardSwish whole", () => {
    const g = graph({ w: [16, 16, 1, 1], b: [16] }, [node("Conv", ["x", "w", "b"], ["c"]), node("HardSwish", ["c"], ["y"])]);
    expect(ops(withOrtFunctionBodies(g, 16))).toEqual(["Conv(x,w,b)->c", "HardSwish(c)->y"]);
  });

  it("becomes HardSigmoid and Mul after a 2-D conv ORT leaves plain (ORT 1.32: 6 depthwise channels, 18 input channels), and everywhere without an NCHWc block", () => {
    const dw = (c: number) => ({ ...graph({ w: [c, 1, 3, 3] }, [{ ...node("Conv", ["x", "w"], ["c"]), attrs: new Map([["group", c]]) }, node("HardSwish", ["c"], ["y"])]) });
    expect(ops(withOrtFunctionBodies(dw(6), 16))).toContain("HardSigmoid(c)->y#HardSigmoid");
    expect(ops(withOrtFunctionBodies(dw(24), 16))).toContain("HardSwish(c)->y");
    const full = (ic: number) => graph({ w: [18, ic, 3, 3] }, [node("Conv", ["x", "w"], ["c"]), node("HardSwish", ["c"], ["y"])]);
    expect(ops(withOrtFunctionBodies(full(18), 16))).toContain("HardSigmoid(c)->y#HardSigmoid");
    expect(ops(withOrtFunctionBodies(full(10), 16))).toContain("HardSwish(c)->y"); // fewer than the block: read plain, blocked
    expect(ops(withOrtFunctionBodies(full(16), 1))).toContain("HardSigmoid(c)->y#HardSigmoid");
  });

  it("becomes HardSigmoid and Mul after a 1-D conv, which ORT does not block, and after any other op", () => {
    const conv1d = graph({ w: [16, 16, 9] }, [node("Conv", ["x", "w"], ["c"]), node("HardSwish", ["c"], ["y"])]);
    expect(ops(withOrtFunctionBodies(conv1d, 16))).toEqual(["Conv(x,w)->c", "HardSigmoid(c)->y#HardSigmoid", "Mul(c,y#HardSigmoid)->y"]);
    const hs = withOrtFunctionBodies(conv1d, 16).nodes[1]!;
    expect([hs.attrs.get("alpha"), hs.attrs.get("beta")]).toEqual([1 / 6, 0.5]);
    const lone = graph({}, [node("Relu", ["x"], ["r"]), node("HardSwish", ["r"], ["y"])]);
    expect(ops(withOrtFunctionBodies(lone, 16))).toEqual(["Relu(x)->r", "HardSigmoid(r)->y#HardSigmoid", "Mul(r,y#HardSigmoid)->y"]);
    const input = graph({}, [node("HardSwish", ["x"], ["y"])]);
    expect(ops(withOrtFunctionBodies(input, 16))).toEqual(["HardSigmoid(x)->y#HardSigmoid", "Mul(x,y#HardSigmoid)->y"]);
  });
});
