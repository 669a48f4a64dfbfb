// ORT's NCHWc layout rewrite as the memory-pattern replay models it (src/estimate/ort-nchwc.ts):
// which tensors are blocked and padded, and where the reorder copies go.
import { describe, expect, it } from "vitest";
import type { LNode } from "../../src/compiler/ir.ts";
import { parseCpuFlags } from "../../src/estimate/cpu-flags.ts";
import { nchwcBlockSize, ortNchwc } from "../../src/estimate/ort-nchwc.ts";

const node = (op: string, inputs: string[], outputs: string[], attrs: LNode["attrs"] = {}): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs });
/** Weights [oc, ic/group, 3, 3]; every activation [N, C, H, W] from `channels`. */
function graph(weights: Record<string, number[]>, channels: Record<string, number>, spatial: Record<string, number[]> = {}) {
  return {
    constDims: (n: string) => weights[n],
    shapeOf: (n: string) => (channels[n] === undefined ? undefined : [-1, channels[n]!, ...(spatial[n] ?? [8, 8])]),
  };
}
const ops = (nodes: LNode[]) => nodes.map((n) => `${n.op}(${n.inputs.filter((i) => !i.startsWith("w")).join(",")})->${n.outputs.join(",")}`);

describe("ORT's NCHWc rewrite", () => {
  // A YOLO neck: conv -> nearest 2x upsample -> concat with an earlier map -> conv. ORT runs the
  // upsample and the concat on the blocked maps; so it does a bilinear one (DPT's fusion stages,
  // aligned corners), except with pytorch_half_pixel coordinates; by a fraction, plain.
  it("runs a nearest or bilinear Resize by whole spatial factors on the blocked tensor, other ones plain", () => {
    const g = graph({ w0: [32, 32, 3, 3], w1: [32, 32, 3, 3], w2: [32, 64, 1, 1] }, { x: 32, k: 32, a: 32, u: 32, c: 64, y: 32 }, { x: [16, 16], k: [16, 16], u: [16, 16], c: [16, 16], y: [16, 16] });
    const resize = (attrs: LNode["attrs"]) => [
      node("Conv", ["x", "w0"], ["k"]), node("Conv", ["x", "w1"], ["a"], { strides: [2, 2] }), node("Resize", ["a", "", "sc"], ["u"], attrs),
      node("Concat", ["u", "k"], ["c"], { axis: 1 }), node("Conv", ["c", "w2"], ["y"]),
    ];
    const nearest = { mode: "nearest", coordinate_transformation_mode: "asymmetric", nearest_mode: "floor", scales: [1, 1, 2, 2] };
    expect(ops(ortNchwc(resize(nearest), ["y"], g, 16).nodes).slice(1)).toEqual([
      "Conv(x#reorder-in)->k#nchwc", "Conv(x#reorder-in)->a#nchwc", "Upsample(a#nchwc)->u#nchwc", "Concat(u#nchwc,k#nchwc)->c#nchwc", "Conv(c#nchwc)->y#nchwc", "ort:ReorderOutput(y#nchwc)->y",
    ]);
    for (const coordinates of ["asymmetric", "align_corners", "half_pixel"]) {
      const bilinear = { ...nearest, mode: "linear", coordinate_transformation_mode: coordinates };
      expect(ops(ortNchwc(resize(bilinear), ["y"], g, 16).nodes), coordinates).toContain("Upsample(a#nchwc)->u#nchwc");
    }
    const plain = [
      { ...nearest, mode: "linear", coordinate_transformation_mode: "pytorch_half_pixel" }, { ...nearest, coordinate_transformation_mode: "half_pixel" },
      { ...nearest, scales: [1, 1, 1.5, 1.5] }, { ...nearest, mode: "linear", scales: [1, 1, 1.5, 1.5] },
    ];
    for (const other of plain) expect(ops(ortNchwc(resize(other), ["y"], g, 16).nodes), JSON.stringify(other)).toContain("Resize(a,,sc)->u");
  });

  it("blocks a first conv's 24 channels as 32 and copies them back for a MaxPool that cannot take them", () => {
    const g = graph({ w1: [24, 3, 3, 3] }, { x: 3, c1: 24, p1: 24 });
    const r = ortNchwc([node("Conv", ["x", "w1"], ["c1"]), node("MaxPool", ["c1"], ["p1"])], ["p1"], g, 16);
    expect(ops(r.nodes)).toEqual(["Conv(x)->c1#nchwc", "ort:ReorderOutput(c1#nchwc)->c1", "MaxPool(c1)->p1"]);
    expect(r.blocked.get("c1#nchwc")).toEqual({ of: "c1", scale: 32 / 24 });
  });

  it("leaves a 1-D pool plain (ORT blocks 4-D inputs only): an audio net's MaxPool of its (N, C, L) maps gets no reorder copies", () => {
    const g = graph({ w1: [64, 1, 80] }, { x: 1, c1: 64, p1: 64, q: 64, q2: 64 }, { x: [16000], c1: [4001], p1: [1000], q: [16, 16], q2: [8, 8] });
    const pool1d = ortNchwc([node("Conv", ["x", "w1"], ["c1"]), node("MaxPool", ["c1"], ["p1"])], ["p1"], g, 16);
    expect(ops(pool1d.nodes)).toEqual(["Conv(x)->c1", "MaxPool(c1)->p1"]);
    // The same 64 channels in a 4-D map are blocked.
    expect(ops(ortNchwc([node("MaxPool", ["q"], ["q2"])], ["q2"], g, 16).nodes)).toEqual(["ort:ReorderInput(q)->q#reorder-in", "MaxPool(q#reorder-in)->q2#nchwc", "ort:ReorderOutput(q2#nchwc)->q2"]);
  });

  it("blocks a conv only with a constant bias: one computed in every request (a float16 model's shared Cast) leaves it plain", () => {
    const g = graph({ w1: [32, 16, 3, 3], wb: [32] }, { x: 16, c1: 32, b: 32 });
    expect(ops(ortNchwc([node("Conv", ["x", "w1", "wb"], ["c1"])], ["c1"], g, 16).nodes)).toEqual(["ort:ReorderInput(x)->x#reorder-in", "Conv(x#reorder-in)->c1#nchwc", "ort:ReorderOutput(c1#nchwc)->c1"]);
    expect(ops(ortNchwc([node("Conv", ["x", "w1", "b"], ["c1"])], ["c1"], g, 16).nodes)).toEqual(["Conv(x,b)->c1"]);
  });

  it("runs a BatchNormalization on the blocked map only where its four parameters are constants (a float16 DenseNet's shared Casts are not)", () => {
    const g = graph({ w1: [32, 16, 3, 3], ws: [32], wb: [32], wm: [32], wv: [32] }, { x: 16, c1: 32, n1: 32, s: 32 });
    const bn = (scale: string) => [node("Conv", ["x", "w1"], ["c1"]), node("BatchNormalization", ["c1", scale, "wb", "wm", "wv"], ["n1"])];
    expect(ops(ortNchwc(bn("ws"), ["n1"], g, 16).nodes)).toEqual(["ort:ReorderInput(x)->x#reorder-in", "Conv(x#reorder-in)->c1#nchwc", "BatchNormalization(c1#nchwc)->n1#nchwc", "ort:ReorderOutput(n1#nchwc)->n1"]);
    expect(ops(ortNchwc(bn("s"), ["n1"], g, 16).nodes)).toEqual(["ort:ReorderInput(x)->x#reorder-in", "Conv(x#reorder-in)->c1#nchwc", "ort:ReorderOutput(c1#nchwc)->c1", "BatchNormalization(c1,s)->n1"]);
  });

  it("reorders a plain input in once for every conv that reads it, padded to the block", () => {
    const g = graph({ w1: [32, 24, 1, 1], w2: [16, 24, 1, 1] }, { p: 24, a: 32, b: 16 });
    const r = ortNchwc([node("Conv", ["p", "w1"], ["a"]), node("Conv", ["p", "w2"], ["b"])], ["a", "b"], g, 16);
    expect(ops(r.nodes)).toEqual([
      "ort:ReorderInput(p)->p#reorder-in", "Conv(p#reorder-in)->a#nchwc", "ort:ReorderOutput(a#nchwc)->a",
      "Conv(p#reorder-in)->b#nchwc", "ort:ReorderOutput(b#nchwc)->b",
    ]);
    expect(r.blocked.get("p#reorder-in")!.scale).toBe(32 / 24);
  });

  it("keeps a squeeze-excite Mul of a map by per-channel scales plain, a pool of 72 channels too, and the padded depthwise conv and QuickGelu blocked", () => {
    const g = graph({ wd: [72, 1, 3, 3], wr: [8, 72, 1, 1], we: [72, 8, 1, 1], wp: [24, 72, 1, 1] },
      { x: 72, d: 72, q: 72, gp: 72, r: 8, s: 72, m: 72, y: 24 }, { gp: [1, 1], r: [1, 1], s: [1, 1] });
    const nodes = [
      node("Conv", ["x", "wd"], ["d"], { group: 72 }),
      node("ort:QuickGelu", ["d"], ["q"]),
      node("GlobalAveragePool", ["q"], ["gp"]),
      node("Conv", ["gp", "wr"], ["r"]),
      node("Conv", ["r", "we"], ["s"]),
      node("Mul", ["q", "s"], ["m"]),
      node("Conv", ["m", "wp"], ["y"]),
    ];
    const r = ortNchwc(nodes, ["y"], g, 16);
    expect(ops(r.nodes)).toEqual([
      "ort:ReorderInput(x)->x#reorder-in",
      "Conv(x#reorder-in)->d#nchwc",
      "ort:QuickGelu(d#nchwc)->q#nchwc",
      "ort:ReorderOutput(q#nchwc)->q", // a pool takes 72 channels plain (not a whole number of blocks)
      "GlobalAveragePool(q)->gp",
      "ort:ReorderInput(gp)->gp#reorder-in",
      "Conv(gp#reorder-in)->r#nchwc",
      "ort:ReorderOutput(r#nchwc)->r", // 8 channels in: the next conv reads the plain tensor
      "Conv(r)->s#nchwc",
      "ort:ReorderOutput(s#nchwc)->s",
      "Mul(q,s)->m",
      "ort:ReorderInput(m)->m#reorder-in",
      "Conv(m#reorder-in)->y#nchwc",
      "ort:ReorderOutput(y#nchwc)->y", // a graph output, copied back where it is computed
    ]);
    expect(r.blocked.get("d#nchwc")!.scale).toBe(80 / 72);
  });

  it("blocks a depthwise conv only when its channels are a multiple of 4 (ORT 1.32): shufflenet_v2_x2_0's 122 stay plain behind a copy", () => {
    const dw = (c: number) => {
      const g = graph({ wp: [c, 16, 1, 1], wd: [c, 1, 3, 3] }, { x: 16, a: c, d: c });
      return ops(ortNchwc([node("Conv", ["x", "wp"], ["a"]), node("Conv", ["a", "wd"], ["d"], { group: c })], ["d"], g, 16).nodes);
    };
    // measured: ORT's optimized graph blocks 4, 12, 20, 44, 100 and 120 channels, not 2, 6, 10, 18 or 122
    expect(dw(20)).toEqual(["ort:ReorderInput(x)->x#reorder-in", "Conv(x#reorder-in)->a#nchwc", "Conv(a#nchwc)->d#nchwc", "ort:ReorderOutput(d#nchwc)->d"]);
    expect(dw(122)).toEqual(["ort:ReorderInput(x)->x#reorder-in", "Conv(x#reorder-in)->a#nchwc", "ort:ReorderOutput(a#nchwc)->a", "Conv(a)->d"]);
    expect(dw(18)).toEqual(dw(122));
  });

  it("blocks a conv of a block or more input channels only when they are a multiple of 4 (ORT 1.32): a 1x1 conv after a 122-channel depthwise conv stays plain", () => {
    const conv = (c: number, fromBlocked: boolean) => {
      const g = graph({ w0: [c, 3, 3, 3], w: [32, c, 1, 1] }, { x: fromBlocked ? 3 : c, a: c, y: 32 });
      const first = fromBlocked ? [node("Conv", ["x", "w0"], ["a"])] : [];
      return ops(ortNchwc([...first, node("Conv", [fromBlocked ? "a" : "x", "w"], ["y"])], ["y"], g, 16).nodes);
    };
    // measured: ORT's optimized graph reorders a plain input of 16, 20, 24, 28, 36 or 124 channels
    // in, and leaves the conv plain on 18, 22, 30 or 122
    expect(conv(20, false)).toEqual(["ort:ReorderInput(x)->x#reorder-in", "Conv(x#reorder-in)->y#nchwc", "ort:ReorderOutput(y#nchwc)->y"]);
    expect(conv(122, false)).toEqual(["Conv(x)->y"]);
    expect(conv(22, false)).toEqual(["Conv(x)->y"]);
    // a blocked input of 122 channels is copied back for the plain conv
    expect(conv(122, true)).toEqual(["Conv(x)->a#nchwc", "ort:ReorderOutput(a#nchwc)->a", "Conv(a)->y"]);
    expect(conv(124, true)).toEqual(["Conv(x)->a#nchwc", "Conv(a#nchwc)->y#nchwc", "ort:ReorderOutput(y#nchwc)->y"]);
  });

  it("lists the nodes ORT adds in the order it adds them: a conv before its ReorderInput, the ReorderOutputs last; a blocked Add keeps its node", () => {
    const g = graph({ w1: [32, 32, 3, 3], w2: [32, 32, 3, 3] }, { x: 32, a: 32, b: 32, s: 32, y: 32 });
    const nodes = [node("Conv", ["x", "w1"], ["a"]), node("Conv", ["a", "w2"], ["b"]), node("Add", ["a", "b"], ["s"]), node("MaxPool", ["s"], ["y"])];
    const r = ortNchwc(nodes, ["y"], g, 16);
    expect(r.added.map((n) => `${n.op}->${n.outputs[0]}`)).toEqual([
      "Conv->a#nchwc", "ort:ReorderInput->x#reorder-in", "Conv->b#nchwc", "MaxPool->y#nchwc", "ort:ReorderOutput->y",
    ]);
    expect(r.nodes.find((n) => n.op === "Add")!.inputs).toEqual(["a#nchwc", "b#nchwc"]);
    expect(r.added.some((n) => n.op === "Add")).toBe(false);
  });

  it("runs Gelu and HardSigmoid on a blocked map, copies it out for LeakyRelu, and makes a Mul by a constant a channel a node of its own", () => {
    const g = { ...graph({ w1: [32, 32, 1, 1], w2: [32, 32, 1, 1] }, { x: 32, a: 32, b: 32, y: 32 }), constDims: (n: string) => ({ w1: [32, 32, 1, 1], w2: [32, 32, 1, 1], sc: [32, 1, 1], sc4: [1, 32, 1, 1], two: [] } as Record<string, number[]>)[n] };
    const between = (mid: LNode) => {
      const r = ortNchwc([node("Conv", ["x", "w1"], ["a"]), mid, node("Conv", ["b", "w2"], ["y"])], ["y"], g, 16);
      return { ops: ops(r.nodes), added: r.added.map((n) => n.op) };
    };
    // measured on ORT 1.32's optimized graphs, between two blocked convs
    for (const op of ["Gelu", "ort:Gelu", "HardSigmoid"]) expect(between(node(op, ["a"], ["b"])).ops[2]).toBe(`${op}(a#nchwc)->b#nchwc`);
    expect(between(node("LeakyRelu", ["a"], ["b"])).ops.slice(2, 5)).toEqual(["ort:ReorderOutput(a#nchwc)->a", "LeakyRelu(a)->b", "ort:ReorderInput(b)->b#reorder-in"]);
    for (const sc of ["sc", "sc4"]) {
      const m = between(node("Mul", [sc, "a"], ["b"]));
      expect(m.ops[2]).toBe(`Mul(${sc},a#nchwc)->b#nchwc`);
      expect(m.added.filter((op) => op === "Mul")).toHaveLength(1); // a depthwise NCHWc conv in ORT
    }
    expect(between(node("Mul", ["a", "two"], ["b"])).ops[2]).toBe("ort:ReorderOutput(a#nchwc)->a");
  });

  it("adds a residual into a blocked conv only when the sum is blocked with the conv's channels, else a plain Add follows", () => {
    const g = graph({ w: [32, 32, 3, 3] }, { a: 32, b: 32, c: 32 });
    const blockedSum = ortNchwc([node("Conv", ["a", "w"], ["b"]), node("ort:ConvSum", ["b", "w", "b"], ["c"])], ["c"], g, 16);
    expect(ops(blockedSum.nodes).slice(1, 3)).toEqual(["Conv(a#reorder-in)->b#nchwc", "ort:ConvSum(b#nchwc,b#nchwc)->c#nchwc"]);
    const plainSum = ortNchwc([node("ort:ConvSum", ["a", "w", "b"], ["c"])], ["c"], g, 16);
    expect(ops(plainSum.nodes)).toEqual([
      "ort:ReorderInput(a)->a#reorder-in", "Conv(a#reorder-in)->c:conv#nchwc", "ort:ReorderOutput(c:conv#nchwc)->c:conv", "Add(c:conv,b)->c",
    ]);
    expect(plainSum.blocked.get("c:conv#nchwc")).toEqual({ of: "c", scale: 1 });
    // A sum ORT cannot show the same shape before the run (computed from a run-time shape): the
    // conv and a blocked Add of its own, as ORT 1.32 runs LR-ASPP's classifier.
    const unknown = ortNchwc([node("Conv", ["a", "w"], ["b"]), node("ort:ConvSum", ["b", "w", "b"], ["c"])], ["c"], { ...g, shapeUnknown: (n: string) => n === "c" }, 16);
    expect(ops(unknown.nodes).slice(1, 4)).toEqual(["Conv(a#reorder-in)->b#nchwc", "Conv(b#nchwc)->c:conv#nchwc", "Add(c:conv#nchwc,b#nchwc)->c#nchwc"]);
  });

  it("changes nothing where MLAS has no NCHWc block, and reads the block from the CPU's flags", () => {
    const g = graph({ w1: [24, 3, 3, 3] }, { x: 3, c1: 24 });
    const nodes = [node("Conv", ["x", "w1"], ["c1"])];
    expect(ortNchwc(nodes, ["c1"], g, 1)).toEqual({ nodes, blocked: new Map(), added: [], replaced: new Map() });
    expect(nchwcBlockSize(parseCpuFlags("flags\t: fpu sse2 avx avx2 avx512f avx512bw\n"), "x64")).toBe(16);
    expect(nchwcBlockSize(parseCpuFlags("flags\t: fpu sse2 avx avx2 fma\n"), "x64")).toBe(8);
    expect(nchwcBlockSize(parseCpuFlags("flags\t: fpu sse2\n"), "x64")).toBe(8); // MLAS's SSE2 baseline has NCHWc kernels too
    expect(nchwcBlockSize(parseCpuFlags("Features\t: fp asimd\n"), "arm64")).toBe(1);
  });
});
