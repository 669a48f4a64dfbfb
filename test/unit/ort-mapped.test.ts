// What a run makes resident of the external data ORT reads in place (src/estimate/ort-mapped.ts):
// only tensors the load probe found mapped; a tensor read whole at the first request, a table
// Gather reads by the windows its ids touch: the first request's, then every eval sample's.
import { describe, expect, it } from "vitest";
import { type ExternalTensor, externalTensors, mappedWeightsMiB } from "../../src/estimate/ort-mapped.ts";
import { FAULT_AROUND_BYTES } from "../../src/estimate/table-reads.ts";
import type { ConstTensor, Graph } from "../../src/compiler/ir.ts";

const MIB = 2 ** 20;
const tensor = (name: string, offset: number, bytes: number, idsPerSample: number | null = null, window?: number): ExternalTensor => ({ name, location: "m.onnx.data", offset, bytes, idsPerSample, ...(window ? { window } : {}) });
const map = (offset: number, size: number, resident = 0) => ({ file: "m.onnx.data", offset, size, resident });
const W = FAULT_AROUND_BYTES;
const run = { firstBatch: 1, evalSamples: 16 };

describe("external data read in place", () => {
  it("counts only the tensors a mapping of the probe's holds, less what the load left resident", () => {
    const bias = tensor("bias", 0, 4096);
    const packed = tensor("w", 4096, MIB);  // pre-packed: its mapping dropped at load
    const norm = tensor("gamma", 4096 + MIB, 8192);
    const maps = [map(0, 4096, 4096), map(4096 + MIB, 8192)];
    const r = mappedWeightsMiB([bias, packed, norm], maps, run);
    expect(r.endMiB * MIB).toBe(8192);
    expect(r.firstMiB * MIB).toBe(8192);
    // Another file's mapping of the same range is not this file's.
    expect(mappedWeightsMiB([norm], [{ ...map(4096 + MIB, 8192), file: "other.data" }], run)).toEqual({ firstMiB: 0, endMiB: 0 });
    // No mappings (an older probe, a failed one): nothing.
    expect(mappedWeightsMiB([bias], null, run)).toEqual({ firstMiB: 0, endMiB: 0 });
  });

  it("reads a table by windows: the first request's ids touch 1 - (1 - 1/W)^T of them, the eval samples' more", () => {
    const table = tensor("emb", 0, 64 * W, 16);
    const maps = [map(0, 64 * W)];
    const one = mappedWeightsMiB([table], maps, { firstBatch: 1, evalSamples: 4 });
    expect(one.firstMiB * MIB).toBeCloseTo(64 * (1 - (63 / 64) ** 16) * W, 3);
    expect(one.endMiB * MIB).toBeCloseTo(64 * (1 - (63 / 64) ** 64) * W, 3);
    // A first batch of 8 reads 128 ids: more of the table, never more than all of it; so does a
    // window as big as the table (a large folio): one read maps all of it.
    const eight = mappedWeightsMiB([table], maps, { firstBatch: 8, evalSamples: 8 }).firstMiB;
    expect(eight).toBeGreaterThan(one.firstMiB);
    expect(eight).toBeLessThanOrEqual(4);
    // The table's measured window where it has one (64 KiB, fault-around, where not).
    expect(mappedWeightsMiB([tensor("emb", 0, 64 * W, 16, 64 * W)], maps, { firstBatch: 1, evalSamples: 1 }).firstMiB).toBe(4);
  });

  it("finds the file's external initializers and the tables Gather reads at fed ids", () => {
    const c = (external?: ConstTensor["external"]): ConstTensor => ({ isFloat: true, dims: [4], data: new Float32Array(4), ...(external ? { external } : {}) });
    const g: Pick<Graph, "nodes" | "consts" | "inputs"> = {
      inputs: [{ name: "ids", dims: ["N", 16], elemType: 7 }],
      consts: new Map([["emb", c({ location: "m.onnx.data", offset: 0, length: 16 })], ["pos", c({ location: "m.onnx.data", offset: 16, length: 16 })], ["tied", c({ location: "m.onnx.data", offset: 32, length: 16 })], ["inline", c()]]),
      nodes: [
        { opType: "Gather", name: "g", inputs: ["emb", "ids"], outputs: ["e"], attrs: new Map() },
        { opType: "Gather", name: "p", inputs: ["pos", "positions"], outputs: ["q"], attrs: new Map() },
        // A tied embedding: Gather reads it at ids, a MatMul whole.
        { opType: "Gather", name: "t", inputs: ["tied", "ids"], outputs: ["te"], attrs: new Map() },
        { opType: "MatMul", name: "head", inputs: ["te", "tied"], outputs: ["logits"], attrs: new Map() },
      ],
    };
    expect(externalTensors(g, (input) => (input === "ids" ? 16 : null))).toEqual([
      { name: "emb", location: "m.onnx.data", offset: 0, bytes: 16, idsPerSample: 16 },
      // Read at computed positions: counted whole.
      { name: "pos", location: "m.onnx.data", offset: 16, bytes: 16, idsPerSample: null },
      { name: "tied", location: "m.onnx.data", offset: 32, bytes: 16, idsPerSample: null },
    ]);
  });
});
