// ORT's PadFusion as the pattern replay applies it (src/estimate/ort-pad-fusion.ts): which Pads
// it folds into their reader, and the ones ORT's rule leaves. The block against ORT itself is
// test/integration/ort-pattern.test.ts ("tf-padding").
import { describe, expect, it } from "vitest";
import type { LNode, Node } from "../../src/compiler/ir.ts";
import { ortPadFusion } from "../../src/estimate/ort-pad-fusion.ts";

const ZERO_SPATIAL = [0, 0, 0, 1, 0, 0, 1, 0];
const pad = (x: string, out: string, attrs: LNode["attrs"] = {}): LNode => ({ op: "Pad", name: out, inputs: [x], outputs: [out], attrs: { pads: ZERO_SPATIAL, mode: "constant", value: 0, ...attrs } });
const conv = (x: string, out: string): LNode => ({ op: "Conv", name: out, inputs: [x, "w"], outputs: [out], attrs: { pads: [0, 0, 0, 0] } });
const file = (n: LNode, inputs: string[], attrs: Record<string, string | number[]> = {}): Node => ({ opType: n.op, name: n.name, inputs, outputs: n.outputs, attrs: new Map(Object.entries(attrs)) });

/** The file's view: the Pad's pads an initializer ("pads"), every Conv's pads given. */
function fused(nodes: LNode[], { opset = 17, outputs = ["y"], files = new Map<LNode, Node>(), consts = new Set(["pads", "zero"]) } = {}): string[] {
  const fileOf = (n: LNode) => files.get(n) ?? (n.op === "Pad" ? file(n, [n.inputs[0]!, "pads", "zero"]) : file(n, n.inputs, { pads: [0, 0, 0, 0] }));
  return ortPadFusion(nodes, new Set(outputs), opset, fileOf, (t) => consts.has(t)).map((n) => `${n.op}(${n.inputs[0]})`);
}

describe("ORT's PadFusion in the pattern replay", () => {
  it("folds a zero constant Pad into the Conv that alone reads it", () => {
    expect(fused([pad("x", "p"), conv("p", "y")])).toEqual(["Conv(x)"]);
    expect(fused([pad("x", "p"), conv("p", "c"), pad("c", "q"), { ...conv("q", "y"), op: "AveragePool", inputs: ["q"] }])).toEqual(["Conv(x)", "AveragePool(c)"]);
  });

  // Measured on ORT 1.32: a zero Pad before a MaxPool stays, and so does one whose value slot
  // is there but empty (torch's LocalResponseNorm: Pad(x, pads, "") before its AveragePool).
  it("leaves a Pad before a MaxPool, and one with an empty value input", () => {
    expect(fused([pad("x", "p"), { ...conv("p", "y"), op: "MaxPool", inputs: ["p"] }])).toEqual(["Pad(x)", "MaxPool(p)"]);
    const p = pad("x", "p");
    expect(fused([p, conv("p", "y")], { files: new Map([[p, file(p, ["x", "pads", ""])]]) })).toEqual(["Pad(x)", "Conv(p)"]);
    expect(fused([p, conv("p", "y")], { files: new Map([[p, file(p, ["x", "pads"])]]) })).toEqual(["Conv(x)"]);
  });

  it("leaves a Pad whose pads or value ORT computes in every request, or whose value is not zero", () => {
    expect(fused([pad("x", "p"), conv("p", "y")], { consts: new Set(["zero"]) })).toEqual(["Pad(x)", "Conv(p)"]);
    expect(fused([pad("x", "p", { value: 1 }), conv("p", "y")])).toEqual(["Pad(x)", "Conv(p)"]);
    expect(fused([pad("x", "p", { value: -0 }), conv("p", "y")])).toEqual(["Pad(x)", "Conv(p)"]);
  });

  it("leaves a reflect or edge Pad, one given axes, and one padding the channels", () => {
    const p = pad("x", "p");
    expect(fused([p, conv("p", "y")], { files: new Map([[p, file(p, ["x", "pads", "zero"], { mode: "reflect" })]]) })).toEqual(["Pad(x)", "Conv(p)"]);
    expect(fused([p, conv("p", "y")], { opset: 18, files: new Map([[p, file(p, ["x", "pads", "zero", "axes"])]]), consts: new Set(["pads", "zero", "axes"]) })).toEqual(["Pad(x)", "Conv(p)"]);
    expect(fused([pad("x", "p", { pads: [0, 1, 0, 0, 0, 1, 0, 0] }), conv("p", "y")])).toEqual(["Pad(x)", "Conv(p)"]);
  });

  it("leaves a Pad with a second reader or that is a graph output, and a Conv whose file gives no pads or an auto_pad", () => {
    expect(fused([pad("x", "p"), conv("p", "y"), conv("p", "z")], { outputs: ["y", "z"] })).toEqual(["Pad(x)", "Conv(p)", "Conv(p)"]);
    expect(fused([pad("x", "p"), conv("p", "y")], { outputs: ["y", "p"] })).toEqual(["Pad(x)", "Conv(p)"]);
    const c = conv("p", "y");
    expect(fused([pad("x", "p"), c], { files: new Map([[c, file(c, c.inputs)]]) })).toEqual(["Pad(x)", "Conv(p)"]);
    expect(fused([pad("x", "p"), c], { files: new Map([[c, file(c, c.inputs, { pads: [0, 0, 0, 0], auto_pad: "SAME_UPPER" })]]) })).toEqual(["Pad(x)", "Conv(p)"]);
  });

  it("leaves every Pad of an opset whose Pad or Conv ORT's rule does not name (Pad-21, Conv-22)", () => {
    expect(fused([pad("x", "p"), conv("p", "y")], { opset: 20 })).toEqual(["Conv(x)"]);
    expect(fused([pad("x", "p"), conv("p", "y")], { opset: 21 })).toEqual(["Pad(x)", "Conv(p)"]);
  });
});
