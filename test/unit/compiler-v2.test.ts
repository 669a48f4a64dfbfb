/**
 * Plan format v2 in the compiler: dtypes on inputs, weights and activations, the symbolic batch
 * carried as k·batch through Shape -> Gather -> Mul/Concat -> Reshape, the batch at any axis,
 * inputShapes, and the reader's v2 validation.
 */
import { describe, expect, it } from "vitest";
import { fmtShape } from "../../src/compiler/ir.ts";
import { parsePlan, readPlan } from "../../src/compiler/index.ts";
import { serialisePlan } from "../../src/compiler/write.ts";
import type { Built } from "../../src/compiler/build.ts";
import { PlanError } from "../../src/compiler/errors.ts";
import { compile } from "./compiler-compile-helper.ts";
import { init, node } from "./compiler-onnx-builder.ts";

const INT64 = 7;
const i64 = (name: string, dims: number[], data: number[]) => init(name, dims, data, "int64");

/** ids [N, 6] int64 -> embedding [N, 6, 4] -> [2·N, 3, 4] (shape arithmetic on the batch) -> [N, 24]. */
const embedModel = {
  inputs: [["ids", ["N", 6], INT64]] as [string, (number | string)[], number][],
  outputs: ["y"],
  inits: [init("table", [10, 4]), i64("zero", [1], [0]), i64("two", [1], [2]), i64("rest", [2], [3, 4]), i64("flat", [2], [-1, 24])],
  nodes: [
    node("Gather", ["table", "ids"], ["e"], { axis: 0 }),
    node("Shape", ["e"], ["s"]),
    node("Gather", ["s", "zero"], ["b"], { axis: 0 }),
    node("Mul", ["b", "two"], ["b2"]),
    node("Concat", ["b2", "rest"], ["target"], { axis: 0 }),
    node("Reshape", ["e", "target"], ["r"]),
    node("Relu", ["r"], ["rr"]),
    node("Reshape", ["rr", "flat"], ["y"]),
  ],
};

describe("plan v2 in the compiler", () => {
  it("plans int64 inputs, a float weight table and a k·batch dimension from folded shape arithmetic", async () => {
    const { h, summary } = await compile(embedModel);
    const byName = (n: string) => h.tensors.find((t) => t.name === n)!;
    expect(byName("ids")).toMatchObject({ dtype: "int64", shape: [-1, 6], kind: "input", bytes: 48 });
    expect(byName("table")).toMatchObject({ dtype: "float32", kind: "weight", bytes: 160 });
    expect(byName("r")).toMatchObject({ shape: [-2, 3, 4], bytes: 96 });  // 2·batch rows of [3, 4]
    expect(h.ops.map((o) => o.op)).toEqual(["Gather", "Reshape", "Relu", "Reshape"]);
    expect(summary.inputs).toEqual([{ name: "ids", shape: [-1, 6], dtype: "int64", batchAxis: 0 }]);
  });

  it("leaves an empty Slice out of the Concat that reads it (Phi-3's rotary pass-through) and refuses other readers", async () => {
    const inits = [i64("st", [1], [8]), i64("en", [1], [2 ** 62]), i64("ax", [1], [2])];
    const slice = node("Slice", ["x", "st", "en", "ax"], ["e"]);
    const inputs = [["x", ["N", 4, 8]]] as [string, (number | string)[]][];
    const alone = await compile({ inputs, outputs: ["y"], inits, nodes: [node("Relu", ["x"], ["a"]), slice, node("Concat", ["a", "e"], ["y"], { axis: 2 })] });
    expect(alone.h.ops.map((o) => o.op)).toEqual(["Relu"]);  // Concat(a, nothing) is a
    expect(alone.h.tensors[alone.h.outputs[0]!]!.shape).toEqual([-1, 4, 8]);
    const two = await compile({ inputs, outputs: ["y"], inits, nodes: [node("Relu", ["x"], ["a"]), slice, node("Concat", ["a", "e", "x"], ["y"], { axis: 2 })] });
    expect(two.h.ops.map((o) => [o.op, o.inputs.length])).toEqual([["Relu", 1], ["Concat", 2]]);
    expect(two.h.tensors[two.h.outputs[0]!]!.shape).toEqual([-1, 4, 16]);
    await expect(compile({ inputs, outputs: ["y"], inits, nodes: [slice, node("Relu", ["e"], ["y"], undefined, "r")] }))
      .rejects.toThrow(/Relu node "r": input "e" is empty \(\[batch, 4, 0\]\); .*only a Concat may read one/);
  });

  it("needs inputShapes for a second symbolic dimension, and records the given shapes", async () => {
    const spec = { inputs: [["ids", ["B", "S"], INT64]] as [string, (number | string)[], number][], outputs: ["y"], inits: [init("t", [10, 4])], nodes: [node("Gather", ["t", "ids"], ["y"], { axis: 0 })] };
    await expect(compile(spec)).rejects.toThrow(/graph input "ids" dimension 1 is "S".*options.inputShapes/);
    const { h } = await compile(spec, { inputShapes: { ids: [-1, 7] } });
    expect(h.tensors[h.outputs[0]!]!.shape).toEqual([-1, 7, 4]);
    await expect(compile(spec, { inputShapes: { idz: [-1, 7] } })).rejects.toThrow(/"idz" is not a graph input/);
    await expect(compile(spec, { inputShapes: { ids: [7, 7] } })).rejects.toThrow(/exactly one -1/);
  });

  it("keeps the batch at axis 1 (seq-first) through Slice, Unsqueeze and Where", async () => {
    const { h } = await compile({
      inputs: [["x", [5, "B", 3]], ["m", [5, "B"], 9]],
      outputs: ["y"],
      inits: [i64("st", [1], [4]), i64("en", [1], [-100]), i64("ax", [1], [0]), i64("sp", [1], [-2]), i64("u", [1], [2]), init("z", [1], [0])],
      nodes: [
        node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        node("Slice", ["m", "st", "en", "ax", "sp"], ["ms"]),
        node("Unsqueeze", ["ms", "u"], ["mu"]),
        node("Where", ["mu", "s", "z"], ["y"]),
      ],
    });
    const y = h.tensors[h.outputs[0]!]!;
    expect(y.shape).toEqual([3, -1, 3]);
    expect(h.ops[0]!.attrs).toEqual({ axes: [0], starts: [4], steps: [-2] });
    expect(h.tensors.find((t) => t.name === "mu")).toMatchObject({ dtype: "bool", shape: [3, -1, 1], bytes: 3 });
  });

  it("prints symbolic dims as batch / k·batch, never NaN, and names non-linear batch arithmetic", async () => {
    expect(fmtShape([-1, -3, 32])).toBe("[batch, 3·batch, 32]");
    const err = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      inits: [i64("zero", [1], [0]), i64("one", [1], [1]), i64("four", [1], [4])],
      nodes: [
        node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["b"], { axis: 0 }), node("Add", ["b", "one"], ["b1"]),
        node("Concat", ["b1", "four"], ["t"], { axis: 0 }), node("Expand", ["x", "t"], ["y"]),
      ],
    }).catch((e: unknown) => e as Error);
    expect((err as Error).message).toMatch(/shape entry 0 depends on the batch non-linearly/);
    expect((err as Error).message).not.toMatch(/NaN/);
    const idx = await compile({ inputs: [["x", ["N", 4]]], outputs: ["y"], inits: [i64("i", [], [9])], nodes: [node("Gather", ["x", "i"], ["y"], { axis: 1 })] }).catch((e: unknown) => e as Error);
    expect((idx as Error).message).toMatch(/index 9 is out of range for axis 1 of size 4/);
  });

  it("folds LessOrEqual / GreaterOrEqual on constants and lowers them on run-time int64", async () => {
    const { h } = await compile({
      inputs: [["m", ["N", 3], INT64]], outputs: ["y"],
      inits: [i64("a", [3], [0, 1, 2]), i64("b", [3], [1, 1, 1])],
      nodes: [node("LessOrEqual", ["a", "b"], ["c"]), node("GreaterOrEqual", ["m", "a"], ["d"]), node("And", ["c", "d"], ["y"])],
    });
    expect(h.ops.map((o) => o.op)).toEqual(["GreaterOrEqual", "And"]);
    const c = h.tensors[h.ops[1]!.inputs.find((id) => h.tensors[id]!.kind === "weight")!]!;
    expect(c).toMatchObject({ dtype: "bool", shape: [3], bytes: 3 });
    expect(h.tensors[h.outputs[0]!]).toMatchObject({ dtype: "bool", shape: [-1, 3] });
  });

  it("lowers Range(0, batch) and ConstantOfShape(Shape(x)) to plan ops instead of folding them", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 3]]], outputs: ["r", "z"],
      inits: [i64("zero", [], [0]), i64("one", [], [1]), i64("i0", [1], [0])],
      nodes: [
        node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["b"], { axis: 0 }),
        node("Range", ["zero", "b", "one"], ["r"]),
        node("ConstantOfShape", ["s"], ["z"], { value: { t: { name: "v", dims: [1], data: [7], type: "int64" } } }),
      ],
    });
    expect(h.ops.map((o) => [o.op, o.inputs, o.attrs])).toEqual([["Range", [], { start: 0, delta: 1 }], ["ConstantOfShape", [], { value: 7 }]]);
    expect(h.outputs.map((id) => [h.tensors[id]!.shape, h.tensors[id]!.dtype])).toEqual([[[-1], "int64"], [[-1, 3], "int64"]]);
  });

  it("a model exported with a fixed batch: its Reshape's leading number is the batch, and -1 stays fixed", async () => {
    const { h, summary } = await compile({
      inputs: [["x", [2, 3, 4]]], outputs: ["y"], inits: [i64("t", [2], [2, -1])],
      nodes: [node("Reshape", ["x", "t"], ["y"])],
    });
    expect(h.tensors[h.outputs[0]!]!.shape).toEqual([-1, 12]);
    expect(summary.warnings.join()).toMatch(/static batch/);
  });

  it("the reader checks v2 dtypes, byte counts and batch entries", async () => {
    const { plan } = await compile(embedModel);
    const rewrite = (mutate: (h: Built["header"]) => void): Buffer => {
      const header = structuredClone(plan.header);
      mutate(header);
      return Buffer.concat(serialisePlan({ header, weights: [{ offset: 0, data: Uint8Array.from(plan.blob) }], blobBytes: plan.blob.length }).chunks);
    };
    expect(() => parsePlan(rewrite(() => {}), "ok")).not.toThrow();
    const ids = plan.header.inputs[0]!;
    const expectErr = (b: Buffer, field: RegExp) => {
      const e = (() => { try { parsePlan(b, "p"); } catch (x) { return x; } })() as PlanError;
      expect(e).toBeInstanceOf(PlanError);
      expect(e.field).toMatch(field);
    };
    expectErr(rewrite((h) => (h.tensors[ids]!.bytes = 24)), /\.bytes$/);  // int64 is 8 bytes an element
    // The estimate's replay-only types (a quantized or half-precision model's) are no plan's.
    for (const dtype of ["float16", "uint8", "int16", "toString"]) expectErr(rewrite((h) => ((h.tensors[ids]! as { dtype: string }).dtype = dtype)), /\.dtype$/);
    expectErr(rewrite((h) => (h.tensors[ids]!.shape = [-1, -1])), /\.shape$/);
    expectErr(rewrite((h) => (h.tensors[ids]!.shape = [-2, 3])), /\.shape$/);  // inputs keep a plain batch
    const w = plan.header.tensors.findIndex((t) => t.kind === "weight");
    expectErr(rewrite((h) => (h.tensors[w]!.shape = [-1, 4])), /\.shape$/);
    expect(readPlan).toBeTypeOf("function");
  });
});
