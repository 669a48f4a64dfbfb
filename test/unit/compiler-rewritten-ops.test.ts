/**
 * Einsum's equation parsing and the refusals of the ops the compiler rewrites into others
 * (Einsum, Tile, InstanceNormalization), each naming the node and what is wrong. (Their
 * numerics against ONNX Runtime: test/integration/native-rewritten-ops.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { CompileError } from "../../src/compiler/index.ts";
import { parseEquation } from "../../src/compiler/ops-einsum.ts";
import { inferGraph } from "../../src/compiler/infer.ts";
import { loadOnnx } from "../../src/compiler/load.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, init, node, writeModel } from "./compiler-onnx-builder.ts";

const i64 = (name: string, data: number[]) => init(name, [data.length], data, "int64");

async function failure(spec: ModelSpec): Promise<string> {
  const err = await compile(spec).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CompileError);
  return (err as Error).message;
}

describe("parseEquation", () => {
  it("expands '...' right-aligned across operands and ignores spaces", () => {
    expect(parseEquation("...ij, ...jk -> ...ik", [4, 3])).toEqual({
      terms: [[".0", ".1", "i", "j"], [".1", "j", "k"]], out: [".0", ".1", "i", "k"],
    });
  });

  it("gives an implicit output: the ellipsis, then the labels seen once, sorted", () => {
    expect(parseEquation("ij,bjk", [2, 3])).toEqual({ terms: [["i", "j"], ["b", "j", "k"]], out: ["b", "i", "k"] });
    expect(parseEquation("b...j,jk", [3, 2])).toEqual({ terms: [["b", ".0", "j"], ["j", "k"]], out: [".0", "b", "k"] });
  });

  it.each([
    ["bii->bi", [3], /label "i" repeats within one term/],
    ["bij->bii", [3], /label "i" repeats within one term/],
    ["bij,bjk->bik", [3], /2 operand terms for 1 inputs/],
    ["bij->bik", [3], /output label "k" is in no operand/],
    ["bij->bj", [4], /do not match the input ranks 4/],
    ["b2j->bj", [3], /term "b2j" is not letters/],
    ["...ij->ij", [4], /drops the "..." axes/],
  ] as [string, number[], RegExp][])("refuses %s", (eq, ranks, msg) => {
    expect(parseEquation(eq, ranks)).toMatch(msg);
  });
});

describe("Einsum, Tile and InstanceNormalization refusals", () => {
  it.each([
    ["a diagonal", { inputs: [["x", ["N", 3, 3]]], nodes: [node("Einsum", ["x"], ["y"], { equation: "bii->bi" }, "e")] }, /Einsum node "e": equation "bii->bi": label "i" repeats/],
    ["three operands", { inputs: [["x", ["N", 3]], ["z", ["N", 3]], ["w", ["N", 3]]], nodes: [node("Einsum", ["x", "z", "w"], ["y"], { equation: "bi,bi,bi->bi" }, "e")] }, /Einsum node "e": 3 operands/],
    ["the batch summed away", { inputs: [["x", ["N", 3, 4]], ["z", ["N", 4, 2]]], nodes: [node("Einsum", ["x", "z"], ["y"], { equation: "bij,bjk->ik" }, "e")] }, /sums over the batch axis of \[batch, 3, 4\]/],
    ["two batch labels", { inputs: [["x", ["N", 3]], ["z", ["N", 4]]], nodes: [node("Einsum", ["x", "z"], ["y"], { equation: "bi,cj->bcij" }, "e")] }, /batch axes different labels \("b", "c"\)/],
    ["mismatched extents", { inputs: [["x", ["N", 3, 4]], ["z", ["N", 5, 2]]], nodes: [node("Einsum", ["x", "z"], ["y"], { equation: "bij,bjk->bik" }, "e")] }, /label "j" is 5 in one operand and 4 in another/],
    ["run-time repeats", { inputs: [["x", ["N", 3]], ["r", [2], 7]], nodes: [node("Tile", ["x", "r"], ["y"], undefined, "t")] }, /Tile node "t": the repeats \("r"\) is computed at run time/],
    ["an InstanceNormalization scale of the wrong size", { inputs: [["x", ["N", 3, 5]]], inits: [init("s", [4]), init("b", [3])], nodes: [node("InstanceNormalization", ["x", "s", "b"], ["y"], undefined, "i")] }, /InstanceNormalization node "i": per-channel input 1 must be \[3\], found \[4\]/],
    ["an InstanceNormalization without spatial axes", { inputs: [["x", ["N", 3]]], inits: [init("s", [3]), init("b", [3])], nodes: [node("InstanceNormalization", ["x", "s", "b"], ["y"], undefined, "i")] }, /input must be \[N, C, spatial...\], found \[batch, 3\]/],
    ["repeats of the wrong length", { inputs: [["x", ["N", 3]]], inits: [i64("r", [1, 2, 3])], nodes: [node("Tile", ["x", "r"], ["y"], undefined, "t")] }, /3 repeats for the rank-2 input \[batch, 3\]/],
  ])("refuses %s, naming the node", async (_, spec, msg) => {
    expect(await failure({ outputs: ["y"], ...spec } as ModelSpec)).toMatch(msg);
  });
});

describe("ONNX Runtime's view of a rewritten op (keepRewrittenOps, memlane estimate's replay)", () => {
  it("is the one node ORT runs, with the rewrite's output shape, between the nodes around it", () => {
    const file = writeModel({
      inputs: [["x", ["N", 3, 5, 4]]], outputs: ["y"], inits: [init("s", [3]), init("b", [3]), init("w", [4, 2])],
      nodes: [
        node("Relu", ["x"], ["r"]),
        node("InstanceNormalization", ["r", "s", "b"], ["i"]),
        node("Einsum", ["i", "w"], ["e"], { equation: "bchw,wk->bchk" }),
        node("Sigmoid", ["e"], ["y"]),
      ],
    });
    const g = loadOnnx(file);
    const ops = (keep: boolean) => inferGraph(g, { keepRewrittenOps: keep }).nodes.map((n) => n.op);
    expect(ops(false)).toEqual(["Relu", "LayerNormalization", "Mul", "Add", "MatMul", "Sigmoid"]);
    const kept = inferGraph(g, { keepRewrittenOps: true });
    expect(kept.nodes.map((n) => [n.op, n.outputs[0]])).toEqual([["Relu", "r"], ["InstanceNormalization", "i"], ["Einsum", "e"], ["Sigmoid", "y"]]);
    expect([kept.shapes.get("i"), kept.shapes.get("e")]).toEqual([[-1, 3, 5, 4], [-1, 3, 5, 2]]);
  });
});
