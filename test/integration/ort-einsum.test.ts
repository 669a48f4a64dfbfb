// The scratch ORT's CPU Einsum asks its arena for (src/estimate/ort-einsum.ts), against ONNX
// Runtime itself: each equation runs as Einsum -> Relu, so the Einsum's output shares the graph
// output's buffer and the second request's arena log (test/fixtures/ort_pattern_size.py) names
// its copies alone, in the order the kernel takes them.
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { einsumScratch } from "../../src/estimate/ort-einsum.ts";
import { ortArenaRequests } from "../fixtures/ort-pattern-size.ts";
import { type ModelSpec, node, tempDir, writeModel } from "../unit/compiler-onnx-builder.ts";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const BATCH = 8;

// XLNet's relative attention (its time-major operands, a weight-shaped second operand), and
// the shapes that skip copies: operands already in order, an axis only one operand has.
const CASES: [string, (number | string)[][]][] = [
  ["ibnd,jbnd->bnij", [[128, "N", 4, 64], [128, "N", 4, 64]]],
  ["ibh,hnd->ibnd", [[128, "N", 256], [256, 4, 64]]],
  ["bnij,jbnd->ibnd", [["N", 4, 128, 128], [128, "N", 4, 64]]],
  ["ijbs,ibns->bnij", [[128, 128, "N", 2], [128, "N", 4, 2]]],
  ["ibnd,snd->ibns", [[128, "N", 4, 64], [2, 4, 64]]],
  ["ijbn->bnij", [[128, 128, "N", 4]]],
  ["bij,bjk->bk", [["N", 64, 32], ["N", 32, 16]]],
  ["bi,ij->bj", [["N", 64], [64, 32]]],
  // An ellipsis: its axes outermost in ORT's order; a weight without them; the implicit output.
  ["...ij,...jk->...ik", [["N", 4, 64, 32], ["N", 4, 32, 16]]],
  ["b...d,dh->bh...", [["N", 16, 8, 64], [64, 32]]],
  ["...ij->...ji", [["N", 4, 64, 32]]],
  ["...ij,...jk", [["N", 4, 64, 32], ["N", 4, 32, 16]]],
];

describe("ORT's Einsum scratch, replayed", () => {
  it.each(CASES)("%s: every copy ORT's kernel asks its arena for, in order", async (equation, dims) => {
    const names = dims.map((_, k) => `x${k}`);
    const spec: ModelSpec = {
      inputs: dims.map((d, k) => [names[k]!, d] as [string, (number | string)[]]),
      outputs: ["y"],
      nodes: [node("Einsum", names, ["e"], { equation }), node("Relu", ["e"], ["y"])],
    };
    const file = writeModel(spec, `einsum-${equation.replace(/\W+/g, "-")}`, dir);
    const shapeOf = (v: string) => dims[names.indexOf(v)]?.map((d) => (d === "N" ? -1 : Number(d)));
    const scratch = einsumScratch({ op: "Einsum", name: "e", inputs: names, outputs: ["e"], attrs: { equation } }, { shapeOf, dtypeOf: () => "float32" });
    expect(scratch).not.toBeNull();
    const atBatch = (sizes: readonly number[], fixed: readonly boolean[] = []) => sizes.map((b, i) => (fixed[i] ? b : b * BATCH));
    const replayed = [...atBatch(scratch!.sizes, scratch!.fixed), ...atBatch(scratch!.after ?? [], scratch!.afterFixed)];
    expect(replayed).toEqual(await ortArenaRequests(file, BATCH));
  }, 60_000);

  it("leaves an equation with a repeated letter (ORT's diagonal) to the pattern (null)", () => {
    const values = { shapeOf: () => [-1, 4, 4], dtypeOf: () => "float32" as const };
    expect(einsumScratch({ op: "Einsum", name: "e", inputs: ["a"], outputs: ["e"], attrs: { equation: "bii->bi" } }, values)).toBeNull();
  });
});
