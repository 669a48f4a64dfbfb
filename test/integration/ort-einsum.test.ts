// The scratch ORT's CPU Einsum asks its arena for (src/estimate/ort-einsum.ts), against ONNX
// Runtime itself: each equation runs as Einsum -> Relu, so the Einsum's output shares the graph
// output's buffer and the second request's arena log (test/fixtures/ort_pattern_size.py, an
// arena that grows by exactly what is asked) names each copy no freed block held. The replay's
// trace of the same file (its scratch events, through the estimate's graph inference) goes
// through the arena replay set the same way, and must ask for the same blocks in the same order.
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { loadOnnx } from "../../src/compiler/load.ts";
import { BFC_MIN_ALLOCATION, BfcArenaReplay } from "../../src/estimate/bfc-arena.ts";
import { einsumScratch } from "../../src/estimate/ort-einsum.ts";
import { ortRunTracePerSample, type TraceEvent } from "../../src/estimate/ort-pattern.ts";
import { ortArenaRequests } from "../fixtures/ort-pattern-size.ts";
import { init, type ModelSpec, node, tempDir, writeModel } from "../unit/compiler-onnx-builder.ts";

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
  // Three operands: each pair frees its copies and the result it replaces before the next.
  ["bi,ij,jk->bk", [["N", 64], [64, 32], [32, 16]]],
  ["bij,bjk,bkl->bil", [["N", 32, 64], ["N", 64, 16], ["N", 16, 8]]],
  ["ibn,jbn,kn->bijk", [[32, "N", 4], [16, "N", 4], [8, 4]]],
];

/** The blocks an arena that grows by what it is asked gets asked for, replaying the trace's kernel scratch at `batch`. */
function scratchExtends(trace: readonly TraceEvent[], batch: number): number[] {
  const arena = new BfcArenaReplay({ sameAsRequested: true });
  const chunks = new Map<number, ReturnType<BfcArenaReplay["alloc"]>>();
  const scratch = new Set<number>();
  for (const e of trace) {
    if (e.kind === "alloc" && e.scratch) {
      scratch.add(e.id);
      chunks.set(e.id, arena.alloc(e.fixed ? e.size : e.size * batch));
    } else if (e.kind === "free" && scratch.has(e.id)) arena.release(chunks.get(e.id)!);
  }
  return arena.report().map((r) => r.bytes);
}

describe("ORT's Einsum scratch, replayed", () => {
  it.each(CASES)("%s: every copy ORT's kernel asks its arena for, in order", async (equation, dims) => {
    // An operand without the batch is a weight, as in a real model: an initializer.
    const names = dims.map((_, k) => `x${k}`);
    const isWeight = (d: (number | string)[]) => !d.includes("N");
    const spec: ModelSpec = {
      inputs: dims.flatMap((d, k) => (isWeight(d) ? [] : [[names[k]!, d] as [string, (number | string)[]]])),
      inits: dims.flatMap((d, k) => (isWeight(d) ? [init(names[k]!, d as number[])] : [])),
      outputs: ["y"],
      nodes: [node("Einsum", names, ["e"], { equation }), node("Relu", ["e"], ["y"])],
    };
    const file = writeModel(spec, `einsum-${equation.replace(/\W+/g, "-")}`, dir);
    const trace = ortRunTracePerSample(loadOnnx(file));
    expect(trace.some((e) => e.kind === "alloc" && e.scratch)).toBe(true);
    // The arena takes whole 256-byte units (BFC_MIN_ALLOCATION); ORT's log names the bytes asked.
    const asked = (await ortArenaRequests(file, BATCH)).map((b) => Math.ceil(b / BFC_MIN_ALLOCATION) * BFC_MIN_ALLOCATION);
    expect(scratchExtends(trace, BATCH)).toEqual(asked);
  }, 60_000);

  it("leaves an equation with a repeated letter (ORT's diagonal) to the pattern (null)", () => {
    const values = { shapeOf: () => [-1, 4, 4], dtypeOf: () => "float32" as const };
    expect(einsumScratch({ op: "Einsum", name: "e", inputs: ["a"], outputs: ["e"], attrs: { equation: "bii->bi" } }, values)).toBeNull();
  });
});
