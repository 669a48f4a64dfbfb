/**
 * Concat inputs in place (src/compiler/concat-in-place.ts, docs/plan-format.md "Concat in
 * place"): where memlane-rt runs a plan one sample at a time, the compiler gives a Concat's
 * inputs their slices of its output, and a DenseNet-like family of Concats the start of its
 * longest one; the independent arena check accepts exactly those layouts. Where the plan runs
 * batches at once (small maps, the batch not first), or the arena would grow by more than an
 * eighth, it does not.
 */
import { describe, expect, it } from "vitest";
import { CONCAT_IN_PLACE_MAX_GROWTH, compileGraph } from "../../src/compiler/compile.ts";
import { concatInputsInPlace, concatOutputsInPlace, placeConcatInputs } from "../../src/compiler/concat-in-place.ts";
import { aliasByteCopies, lifetimes } from "../../src/compiler/arena.ts";
import { loadOnnx } from "../../src/compiler/load.ts";
import type { PlanHeader } from "../../src/compiler/plan-format.ts";
import { PLAN_VERSION } from "../../src/compiler/plan-format.ts";
import { checkPlanArena } from "../../src/compiler/verify.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, init, node, writeModel } from "./compiler-onnx-builder.ts";

const conv = (x: string, w: string, y: string, k = 1) => node("Conv", [x, w], [y], { kernel_shape: [k, k], pads: [k >> 1, k >> 1, k >> 1, k >> 1] });
const weight = (name: string, m: number, c: number, k = 1) => init(name, [m, c, k, k]);
const byName = (h: PlanHeader, name: string) => h.tensors.find((t) => t.name === name)!;

/** x [N, 8, s, s] -> a = Relu(1x1, 16 ch), b = Relu(3x3, cb ch) -> Concat -> 1x1 (4 ch). */
function fire(s: number, cb = 16): ModelSpec {
  return {
    inputs: [["x", ["N", 8, s, s]]], outputs: ["z"],
    inits: [weight("wa", 16, 8), weight("wb", cb, 8, 3), weight("wz", 4, 16 + cb)],
    nodes: [
      conv("x", "wa", "a0"), node("Relu", ["a0"], ["a"]),
      conv("x", "wb", "b0", 3), node("Relu", ["b0"], ["b"]),
      node("Concat", ["a", "b"], ["y"], { axis: 1 }),
      conv("y", "wz", "z"),
    ],
  };
}

describe("Concat inputs in place", () => {
  it("lays a fire module's expands in their slices of the Concat (32x32 maps: one sample at a time)", async () => {
    const { plan, h, summary } = await compile(fire(32));
    expect(plan.version).toBe(PLAN_VERSION);
    expect([summary.profiles[0]!.concatInputsInPlace, summary.profiles[0]!.concatInputs]).toEqual([2, 2]);
    expect(h.arena.concatInPlace).toBe(true);
    const y = byName(h, "y");
    expect(byName(h, "a").offset).toBe(y.offset);
    expect(byName(h, "b").offset).toBe(y.offset + 16 * 32 * 32 * 4);
    expect(concatInputsInPlace(h)).toHaveLength(2);
    // The independent check recognises the layout only under the flag: without it, the inputs
    // overlap their live output.
    const unflagged = { ...h, arena: { ...h.arena, concatInPlace: false } };
    expect(checkPlanArena(unflagged).problems.join("\n")).toMatch(/overlaps/);
    // ... and an input one slot off is an overlap, not a slice.
    const moved = { ...h, tensors: h.tensors.map((t) => (t.name === "b" ? { ...t, offset: t.offset + 64 } : t)) };
    expect(checkPlanArena(moved).problems.join("\n")).toMatch(/"#\d+ b" .* overlaps|overlaps "#\d+ b"/);
  });

  it("leaves plans that run batches at once as they were: small maps, the batch not first", async () => {
    const { h: small, summary } = await compile(fire(4));
    expect(small.arena.concatInPlace).toBeUndefined();
    expect([summary.profiles[0]!.concatInputsInPlace, summary.profiles[0]!.concatInputs]).toEqual([0, 2]);
    expect(concatInputsInPlace(small)).toEqual([]);
    expect(byName(small, "a").offset).not.toBe(byName(small, "y").offset);
    // A transpose that moves the batch: memlane-rt runs the whole batch at once (not chunkable).
    const spec = fire(32);
    spec.nodes = [node("Transpose", ["x"], ["xt"], { perm: [1, 0, 2, 3] }), node("Transpose", ["xt"], ["xb"], { perm: [1, 0, 2, 3] }),
      ...spec.nodes.map((n) => ({ ...n, inputs: n.inputs.map((i) => (i === "x" ? "xb" : i)) }))];
    expect((await compile(spec)).h.arena.concatInPlace).toBeUndefined();
  });

  it("copies an input whose slice is off the 64-byte grid, and places the others", async () => {
    // 45x45 maps (8100 B a channel): a (16 ch) and b (3 ch) start on the grid, c after 19 channels does not.
    const { h } = await compile({
      inputs: [["x", ["N", 8, 45, 45]]], outputs: ["z"],
      inits: [weight("wa", 16, 8), weight("wb", 3, 8, 3), weight("wc", 16, 8), weight("wz", 4, 35)],
      nodes: [conv("x", "wa", "a"), conv("x", "wb", "b", 3), conv("x", "wc", "c"), node("Concat", ["a", "b", "c"], ["y"], { axis: 1 }), conv("y", "wz", "z")],
    });
    expect(h.arena.concatInPlace).toBe(true);
    expect(concatInputsInPlace(h).map((c) => h.tensors[c.input]!.name)).toEqual(["a", "b"]);
    expect(byName(h, "c").offset % 64).toBe(0);
  });

  it("lays a DenseNet-like family at the start of its longest Concat: no Concat copies", async () => {
    // f1 = conv(x0); c2 = [x0, f1]; f2 = conv(c2); c3 = [x0, f1, f2]; f3 = conv(c3); c4 = [x0 .. f3]
    const { h } = await compile({
      inputs: [["x", ["N", 8, 32, 32]]], outputs: ["z"],
      inits: [weight("w0", 16, 8), weight("w1", 16, 16, 3), weight("w2", 16, 32, 3), weight("w3", 16, 48, 3), weight("wz", 4, 64)],
      nodes: [
        conv("x", "w0", "x0"), conv("x0", "w1", "f1", 3),
        node("Concat", ["x0", "f1"], ["c2"], { axis: 1 }), conv("c2", "w2", "f2", 3),
        node("Concat", ["x0", "f1", "f2"], ["c3"], { axis: 1 }), conv("c3", "w3", "f3", 3),
        node("Concat", ["x0", "f1", "f2", "f3"], ["c4"], { axis: 1 }), conv("c4", "wz", "z"),
      ],
    });
    expect(h.arena.concatInPlace).toBe(true);
    const c4 = byName(h, "c4").offset, slice = 16 * 32 * 32 * 4;
    expect(["x0", "f1", "f2", "f3"].map((n) => byName(h, n).offset)).toEqual([0, 1, 2, 3].map((i) => c4 + i * slice));
    expect([byName(h, "c2").offset, byName(h, "c3").offset]).toEqual([c4, c4]);
    expect(concatInputsInPlace(h)).toHaveLength(2 + 3 + 4);
    expect(concatOutputsInPlace(h).map((c) => h.tensors[c.output]!.name).sort()).toEqual(["c2", "c3"]);
  });

  it("gives a tensor one place: a family member its head also reads, a head that repeats an input", async () => {
    // c2 = [x0, f1] begins the head c3: c3 = [x0, f1, c2] also reads c2, and c3 = [x0, f1, x0]
    // repeats x0. Each tensor lies in one slice at most; the rest are copied.
    for (const third of ["c2", "x0"]) {
      const { h } = await compile({
        inputs: [["x", ["N", 8, 32, 32]]], outputs: ["z"],
        inits: [weight("w0", 16, 8), weight("w1", 16, 16), weight("wz", 4, third === "c2" ? 64 : 48)],
        nodes: [
          conv("x", "w0", "x0"), conv("x0", "w1", "f1"),
          node("Concat", ["x0", "f1"], ["c2"], { axis: 1 }), node("Concat", ["x0", "f1", third], ["c3"], { axis: 1 }),
          conv("c3", "wz", "z"),
        ],
      });
      expect(h.arena.concatInPlace).toBe(true);
      const placed = concatInputsInPlace(h).map((c) => `${c.step}:${h.tensors[c.input]!.name}`);
      expect(new Set(placed).size).toBe(placed.length);
    }
  });

  it("keeps the copies where laying the inputs in place would grow the arena by more than an eighth", async () => {
    // e (32 ch) is made early and concatenated late: in place, the Concat's output (64 ch) is
    // held across two 64-channel maps instead of e alone, +20 %.
    const spec: ModelSpec = {
      inputs: [["x", ["N", 8, 32, 32]]], outputs: ["z"],
      inits: [weight("we", 32, 8), weight("w1", 64, 32), weight("w2", 64, 64), weight("w3", 32, 64), weight("wz", 4, 64)],
      nodes: [
        conv("x", "we", "e"), conv("e", "w1", "h1"), conv("h1", "w2", "h2"), conv("h2", "w3", "h3"),
        node("Concat", ["h3", "e"], ["y"], { axis: 1 }), conv("y", "wz", "z"),
      ],
    };
    const { h } = await compile(spec);
    expect(h.arena.concatInPlace).toBeUndefined();
    // The rule alone would place both: the growth is what refused them.
    const { inf } = compileGraph(loadOnnx(writeModel(spec)));
    const lives = lifetimes(inf.nodes, inf.inputs, inf.outputs, inf.shapes);
    const { planned, aliasOf } = aliasByteCopies(inf.nodes, lives, inf.inputs, inf.outputs);
    expect(placeConcatInputs(inf.nodes, planned, aliasOf, inf.shapes, () => 4, inf.inputs, inf.outputs).inside.size).toBe(2);
    expect(CONCAT_IN_PLACE_MAX_GROWTH).toBeLessThan(1.2);
  });
});
