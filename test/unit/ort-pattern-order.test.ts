// The ORT memory-pattern replay (src/estimate/ort-pattern.ts) runs the nodes in ORT's own
// execution order (src/estimate/ort-order.ts), not the file's: two branches whose wide middles
// ORT runs one after the other are alive together in the file's order.
import { describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { inOrtOrder, ortExecutionOrder } from "../../src/estimate/ort-order.ts";
import { ortPatternBytesPerSample } from "../../src/estimate/ort-pattern.ts";
import { TWO_BRANCHES, TWO_BRANCHES_PATTERN_PER_SAMPLE } from "../fixtures/ort-two-branches.ts";
import { init, node, writeModel } from "./compiler-onnx-builder.ts";

describe("ORT's execution order", () => {
  it("walks back from the outputs, the producer with the highest node index first", () => {
    const g = loadOnnx(writeModel(TWO_BRANCHES));
    expect(ortExecutionOrder(g.nodes).map((n) => n.name)).toEqual(["q1", "q2", "p1", "p2", "y"]);
  });

  it("orders lowered nodes by the ONNX node that made their output, and keeps producers first", () => {
    const onnx = [
      { name: "a", inputs: ["x"], outputs: ["a"] },
      { name: "b", inputs: ["x"], outputs: ["b"] },
      { name: "c", inputs: ["a", "b"], outputs: ["c"] },
    ];
    // "b.relu" is a node the lowering added after b (no ONNX node makes "b2"): it stays after b.
    const lowered = [
      { name: "a", inputs: ["x"], outputs: ["a"] },
      { name: "b", inputs: ["x"], outputs: ["b1"] },
      { name: "b.relu", inputs: ["b1"], outputs: ["b"] },
      { name: "c", inputs: ["a", "b"], outputs: ["c"] },
    ];
    expect(inOrtOrder(lowered, onnx).map((n) => n.name)).toEqual(["b", "b.relu", "a", "c"]);
  });

  it("puts one wide middle in the pattern where the file's order had two", () => {
    // ORT's order: q1 (4 KiB a sample), q2 beside it, q1 freed, p1 at q1's place, p2 after q2.
    // The file's order (p1, q1, p2, q2) would hold both middles: 8 KiB and more.
    expect(ortPatternBytesPerSample(loadOnnx(writeModel(TWO_BRANCHES)))).toBe(TWO_BRANCHES_PATTERN_PER_SAMPLE);
  });
});

describe("ORT's memory pattern on transformers' softmax guard, Where(IsNaN(p), 0, p)", () => {
  const guard = (maskOp: "IsNaN" | "Equal") => writeModel({
    inputs: [["x", ["N", 256]]], outputs: ["y"],
    inits: [init("zero", [], [0])],
    nodes: [
      node("Softmax", ["x"], ["p"], { axis: -1 }),
      node(maskOp, maskOp === "IsNaN" ? ["p"] : ["p", "p"], ["m"]),
      node("Where", ["m", "zero", "p"], ["y"]),
    ],
  }, `guard-${maskOp}`);

  it("is the pattern of one bool tensor of p's shape in IsNaN's place (shape inference no longer throws on it)", () => {
    // Before, inference threw on IsNaN and every BERT/ViT export fell back to the compiler's
    // arena for ORT's activations (bert-tiny at batch 64: 25 MiB estimated, 70 grown).
    const withIsNaN = ortPatternBytesPerSample(loadOnnx(guard("IsNaN")));
    expect(withIsNaN).toBeGreaterThan(1024);
    expect(withIsNaN).toBe(ortPatternBytesPerSample(loadOnnx(guard("Equal"))));
  });
});
