/**
 * CumSum and GatherElements (RoBERTa-family position ids and token types): the shapes, dtypes
 * and resolved attributes the lowerings give, RoBERTa's embedding pattern as torch's legacy
 * exporter writes it, and the refusals, each naming the node and what is wrong.
 */
import { describe, expect, it } from "vitest";
import { CompileError } from "../../src/compiler/index.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, init, node } from "./compiler-onnx-builder.ts";

const INT64 = 7, INT32 = 6, BOOL = 9;
const i64 = (name: string, dims: number[], data: number[]) => init(name, dims, data, "int64");

async function failure(spec: ModelSpec): Promise<string> {
  const err = await compile(spec).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CompileError);
  return (err as Error).message;
}

const byName = (h: Awaited<ReturnType<typeof compile>>["h"], name: string) => h.tensors.find((t) => t.name === name);

describe("CumSum", () => {
  it("keeps the input's shape and dtype, resolves a negative axis and both flags", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 5, 3]], ["m", ["N", 7], INT32], ["s", [4, "N"], INT64]], outputs: ["a", "b", "c"],
      inits: [i64("last", [], [-1]), i64("one", [1], [1]), i64("zero", [], [0])],
      nodes: [
        node("CumSum", ["x", "last"], ["a"], { exclusive: 1, reverse: 1 }),
        node("CumSum", ["m", "one"], ["b"]),
        node("CumSum", ["s", "zero"], ["c"], { reverse: 1 }),  // along the sequence of a seq-first tensor
      ],
    });
    expect(h.ops.map((o) => [o.op, o.attrs])).toEqual([
      ["CumSum", { axis: 2, exclusive: 1, reverse: 1 }],
      ["CumSum", { axis: 1, exclusive: 0, reverse: 0 }],
      ["CumSum", { axis: 0, exclusive: 0, reverse: 1 }],
    ]);
    expect(h.ops.every((o) => o.inputs.length === 1)).toBe(true);  // the axis became an attribute
    expect([byName(h, "a"), byName(h, "b"), byName(h, "c")].map((t) => [t?.shape, t?.dtype])).toEqual([
      [[-1, 5, 3], "float32"], [[-1, 7], "int32"], [[4, -1], "int64"],
    ]);
  });

  it("sums along the batch axis too (the CPU backend then runs the batch whole)", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 3]]], outputs: ["y"], inits: [i64("a", [], [0])],
      nodes: [node("CumSum", ["x", "a"], ["y"])],
    });
    expect(h.ops[0]!.attrs).toEqual({ axis: 0, exclusive: 0, reverse: 0 });
  });

  it.each([
    ["a run-time axis", { inputs: [["x", ["N", 3]], ["a", ["N"], INT64]], nodes: [node("CumSum", ["x", "a"], ["y"])] }, /CumSum node "c": the axis \(input 1, "a"\) must be a constant; it is computed at run time/],
    ["an axis of two values", { inputs: [["x", ["N", 3]]], inits: [i64("a", [2], [0, 1])], nodes: [node("CumSum", ["x", "a"], ["y"])] }, /must be one integer, found an integer tensor \[2\]/],
    ["a float axis", { inputs: [["x", ["N", 3]]], inits: [init("a", [], [1])], nodes: [node("CumSum", ["x", "a"], ["y"])] }, /must be one integer, found a float tensor \[\]/],
    ["an axis out of range", { inputs: [["x", ["N", 3]]], inits: [i64("a", [], [-3])], nodes: [node("CumSum", ["x", "a"], ["y"])] }, /axis -3 is out of range for rank 2/],
    ["exclusive = 2", { inputs: [["x", ["N", 3]]], inits: [i64("a", [], [1])], nodes: [node("CumSum", ["x", "a"], ["y"], { exclusive: 2 })] }, /attribute exclusive is 2; ONNX allows 0 or 1/],
    ["a bool input", { inputs: [["x", ["N", 3], BOOL]], inits: [i64("a", [], [1])], nodes: [node("CumSum", ["x", "a"], ["y"])] }, /input "x" is bool; memlane-rt sums float32, int64, int32/],
  ])("refuses %s, naming the node", async (_, spec, msg) => {
    const s = { outputs: ["y"], ...spec } as ModelSpec;
    s.nodes[0]!.name = "c";
    expect(await failure(s)).toMatch(msg);
  });
});

describe("GatherElements", () => {
  it("gives the indices' shape in the data's dtype, from an activation, a weight and along the batch", async () => {
    const { h } = await compile({
      inputs: [["buf", ["N", 12], INT64], ["pos", ["N", 5], INT64], ["rows", ["N", 3], INT32], ["x", ["N", 4, 3]], ["k", ["N", 2, 3], INT64]],
      outputs: ["tt", "w", "e", "b"],
      inits: [init("table", [4, 3])],
      nodes: [
        node("GatherElements", ["buf", "pos"], ["tt"], { axis: -1 }),
        node("GatherElements", ["table", "rows"], ["w"], { axis: 0 }),
        node("GatherElements", ["x", "k"], ["e"], { axis: 2 }),  // axis 1 of the indices smaller than the data's
        node("GatherElements", ["pos", "pos"], ["b"], { axis: 0 }),  // run-time sample numbers
      ],
    });
    expect(h.ops.map((o) => [o.op, o.attrs.axis])).toEqual([["GatherElements", 1], ["GatherElements", 0], ["GatherElements", 2], ["GatherElements", 0]]);
    expect(["tt", "w", "e", "b"].map((n) => [byName(h, n)?.shape, byName(h, n)?.dtype])).toEqual([
      [[-1, 5], "int64"], [[-1, 3], "float32"], [[-1, 2, 3], "float32"], [[-1, 5], "int64"],
    ]);
    expect(h.tensors[h.ops[1]!.inputs[0]!]!.kind).toBe("weight");
  });

  it("compiles RoBERTa's embeddings: position ids by CumSum, token types from an expanded buffer", async () => {
    // transformers' RobertaEmbeddings as torch's legacy exporter writes it (pad id 1, positions
    // from 2): mask = Cast(Not(Equal(ids, 1))), positions = Cast(CumSum(mask, 1) * mask) + 1,
    // token types = GatherElements(Expand(buffer [1, 16], [batch, 1]), positions, axis 1).
    const { h } = await compile({
      inputs: [["ids", ["N", 6], INT64]], outputs: ["emb"], opset: 17,
      inits: [
        i64("pad", [], [1]), i64("one", [], [1]), i64("zero", [], [0]), i64("axes0", [1], [0]), i64("one1", [1], [1]),
        i64("buffer", [1, 16], new Array(16).fill(0)), init("types", [2, 4]), init("positions", [16, 4]),
      ],
      nodes: [
        node("Equal", ["ids", "pad"], ["eq"]), node("Not", ["eq"], ["ne"]), node("Cast", ["ne"], ["mask"], { to: INT32 }),
        node("CumSum", ["mask", "one"], ["cs"]), node("Mul", ["cs", "mask"], ["masked"]), node("Cast", ["masked"], ["m64"], { to: INT64 }),
        node("Add", ["m64", "one"], ["position_ids"]),
        node("Shape", ["ids"], ["shape"]), node("Gather", ["shape", "zero"], ["n"], { axis: 0 }), node("Unsqueeze", ["n", "axes0"], ["n1"]),
        node("Concat", ["n1", "one1"], ["target"], { axis: 0 }), node("Expand", ["buffer", "target"], ["expanded"]),
        node("GatherElements", ["expanded", "position_ids"], ["token_type_ids"], { axis: 1 }),
        node("Gather", ["types", "token_type_ids"], ["te"]), node("Gather", ["positions", "position_ids"], ["pe"]),
        node("Add", ["te", "pe"], ["emb"]),
      ],
    });
    expect(h.ops.map((o) => o.op)).toContain("CumSum");
    expect(byName(h, "expanded")?.shape).toEqual([-1, 16]);
    expect(byName(h, "token_type_ids")?.shape).toEqual([-1, 6]);
    expect(byName(h, "emb")?.shape).toEqual([-1, 6, 4]);
  });

  it.each([
    ["constant indices along the batch", { inputs: [["x", ["N", 3]]], inits: [i64("i", [2, 3], [0, 0, 0, 1, 1, 1])], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 0 })] }, /constant indices "i" would pick samples along the batch axis 0 of \[batch, 3\]/],
    ["constant indices off the batch", { inputs: [["x", ["N", 3]]], inits: [i64("i", [1, 2], [0, 2])], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 1 })] }, /constant indices "i" give a result of their fixed shape \[1, 2\], without the batch/],
    ["float indices", { inputs: [["x", ["N", 3]], ["i", ["N", 3]]], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 1 })] }, /indices are float32, expected int64 or int32/],
    ["indices of another rank", { inputs: [["x", ["N", 3, 2]], ["i", ["N", 3], INT64]], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 1 })] }, /data \[batch, 3, 2\] and indices \[batch, 3\] must have the same rank/],
    // A [1, 16] buffer not expanded to the batch: ONNX Runtime refuses it at any batch above 1.
    ["a buffer of one row against batch indices", { inputs: [["i", ["N", 6], INT64]], inits: [i64("buf", [1, 16], new Array(16).fill(0))], nodes: [node("GatherElements", ["buf", "i"], ["y"], { axis: 1 })] }, /axis 0 of the indices \[batch, 6\] is the batch but 1 in the data \[1, 16\].*ONNX Runtime refuses a batch above 1/],
    ["indices that drop the data's batch", { inputs: [["x", [4, "N"]], ["i", ["N", 1], INT64]], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 0 })] }, /axis 1 is the data's batch \(batch\) but 1 in the indices/],
    ["indices larger than the data off the axis", { inputs: [["x", ["N", 2, 3]], ["i", ["N", 4, 3], INT64]], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 2 })] }, /axis 1: the indices' dim 4 exceeds the data's 2 \(only the gathered axis 2 may differ\)/],
    ["an axis out of range", { inputs: [["x", ["N", 3]], ["i", ["N", 3], INT64]], nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: 2 })] }, /axis 2 is out of range for rank 2/],
  ])("refuses %s, naming the node", async (_, spec, msg) => {
    const s = { outputs: ["y"], ...spec } as ModelSpec;
    s.nodes[0]!.name = "g";
    const m = await failure(s);
    expect(m).toMatch(/GatherElements node "g"/);
    expect(m).toMatch(msg);
  });
});
