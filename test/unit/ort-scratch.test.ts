// What ORT's CPU kernels take from the arena while they run (src/estimate/ort-scratch.ts).
import { describe, expect, it } from "vitest";
import type { LNode } from "../../src/compiler/ir.ts";
import { BIAS_GELU, FAST_GELU, GELU } from "../../src/estimate/ort-fusions-transformer.ts";
import { ortKernelScratch } from "../../src/estimate/ort-scratch.ts";

const node = (op: string, inputs: string[], outputs: string[]): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs: {} });
const values = { shapeOf: (n: string) => ({ y: [-1, 56, 56, 128], fixed: [4, 128] } as Record<string, number[]>)[n], dtypeOf: () => "float32" as const };

describe("ORT's kernel scratch", () => {
  it("gives a BiasGelu, and a FastGelu with a bias, a tensor of the output's size after it (bias_gelu.cc's temp)", () => {
    expect(ortKernelScratch(node(BIAS_GELU, ["mm", "c_bias"], ["y"]), values)).toEqual({ sizes: [56 * 56 * 128 * 4], beforeOutputs: false });
    expect(ortKernelScratch(node(FAST_GELU, ["mm", "c_bias"], ["y"]), values)).toEqual({ sizes: [56 * 56 * 128 * 4], beforeOutputs: false });
    // no bias: the kernel computes in place in its output
    expect(ortKernelScratch(node(FAST_GELU, ["mm"], ["y"]), values)).toBeNull();
    expect(ortKernelScratch(node(GELU, ["mm"], ["y"]), values)).toBeNull();
    // an output without the batch is not the batch's
    expect(ortKernelScratch(node(BIAS_GELU, ["mm", "c_bias"], ["fixed"]), values)).toBeNull();
  });
});
