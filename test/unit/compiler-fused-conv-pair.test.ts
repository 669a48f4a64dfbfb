/**
 * The 1x1 Conv -> depthwise Conv pair memlane-rt's CPU backend fuses (src/compiler/fused-conv-pair.ts):
 * the plan keeps the 1x1 conv's input alive through the depthwise conv, so the depthwise
 * output never takes the input's bytes (the fused kernel reads the one while it writes the other).
 */
import { describe, expect, it } from "vitest";
import { pointwiseDepthwisePairs } from "../../src/compiler/fused-conv-pair.ts";
import type { LNode } from "../../src/compiler/ir.ts";
import { compile } from "./compiler-compile-helper.ts";
import { init, node, values } from "./compiler-onnx-builder.ts";

const conv = (name: string, x: string, w: string, y: string, attrs: LNode["attrs"]): LNode =>
  ({ op: "Conv", name, inputs: [x, w], outputs: [y], attrs: { kernel: [1, 1], strides: [1, 1], pads: [0, 0, 0, 0], dilations: [1, 1], group: 1, activation: "none", ...attrs } });

const pairModel = (c: number, side: number) => ({
  inputs: [["x", ["N", 8, side, side]]] as [string, (string | number)[]][], outputs: ["y"],
  inits: [init("wp", [c, 8, 1, 1], values(8 * c)), init("wd", [c, 1, 3, 3], values(9 * c, 2))],
  nodes: [
    node("Conv", ["x", "wp"], ["t"]),
    node("Relu", ["t"], ["r"]),
    node("Conv", ["r", "wd"], ["y"], { group: c, strides: [2, 2], pads: [1, 1, 1, 1] }),
  ],
});

describe("1x1 -> depthwise conv pairs", () => {
  it("keep the 1x1 conv's input apart from the depthwise output in the arena", async () => {
    // x dies at the 1x1 conv: without the rule the planner puts y (born later, smaller than the
    // 1x1 output) on x's bytes.
    const { h } = await compile(pairModel(48, 20));
    const t = (n: string) => h.tensors.find((x) => x.name === n)!;
    const [x, y] = [t("x"), t("y")];
    expect(x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset).toBe(true);
  });

  it("are found with either conv's activation as an op of its own, and not across another op, a grouped conv or a second reader", () => {
    const shapes = new Map<string, number[]>([["a", [-1, 8, 5, 5]], ["t", [-1, 32, 5, 5]], ["r", [-1, 32, 5, 5]], ["y", [-1, 32, 5, 5]], ["z", [-1, 32, 5, 5]]]);
    const dw = conv("dw", "r", "wd", "y", { kernel: [3, 3], pads: [1, 1, 1, 1], group: 32 });
    const act = (op: string, x: string, y: string): LNode => ({ op, name: `${op}_${y}`, inputs: [x], outputs: [y], attrs: {} });
    const pairs = (ops: LNode[], outputs = ["z"]) => pointwiseDepthwisePairs(ops, outputs, (t) => shapes.get(t));
    expect(pairs([conv("pw", "a", "wp", "t", {}), act("Clip", "t", "r"), dw, act("HardSwish", "y", "z")]))
      .toEqual([{ step: 0, input: "a", last: 3, between: ["t", "r"], dims: [-1, 32, 5, 5] }]);
    expect(pairs([conv("pw", "a", "wp", "r", { activation: "relu" }), dw], ["y"])).toEqual([{ step: 0, input: "a", last: 1, between: ["r"], dims: [-1, 32, 5, 5] }]);
    // A Sigmoid is not folded: the depthwise conv does not read the 1x1 conv's result.
    expect(pairs([conv("pw", "a", "wp", "t", {}), act("Sigmoid", "t", "r"), dw], ["y"])).toEqual([]);
    // A grouped (not depthwise) second conv, and a strided first one.
    expect(pairs([conv("pw", "a", "wp", "r", {}), { ...dw, attrs: { ...dw.attrs, group: 8 } }], ["y"])).toEqual([]);
    expect(pairs([conv("pw", "a", "wp", "r", { strides: [2, 2] }), dw], ["y"])).toEqual([]);
    // The 1x1 output read elsewhere too (a graph output): the pair runs apart.
    expect(pairs([conv("pw", "a", "wp", "r", {}), dw], ["y", "r"])).toEqual([]);
  });
});
