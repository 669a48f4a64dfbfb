// Tables read in place a row at a time (src/estimate/table-reads.ts): resident by the windows
// their ids touch, and which of a plan's weights are such tables.
import { describe, expect, it } from "vitest";
import { planTables, tableBytesRead } from "../../src/estimate/table-reads.ts";

describe("a table read in place", () => {
  it("becomes resident by the windows its ids touch: 1 - (1 - 1/W)^T of W, never more than the table", () => {
    const W = 64 * 1024;
    expect(tableBytesRead(100 * W, 1, W)).toBeCloseTo(W, 6);
    expect(tableBytesRead(100 * W, 50, W)).toBeCloseTo(100 * (1 - 0.99 ** 50) * W, 3);
    expect(tableBytesRead(100 * W, 100000, W)).toBeCloseTo(100 * W, 0);
    // A window larger than the table (a large folio): one read maps all of it.
    expect(tableBytesRead(10000, 1, 2 ** 21)).toBe(10000);
    expect(tableBytesRead(100 * W, 0, W)).toBe(0);
  });

  it("is a plan weight only Gather reads, on axis 0, at a plan input's ids (a tied head's weight is read whole)", () => {
    const t = (kind: string, offset: number, bytes: number, shape: number[] = []) => ({ name: `t${offset}`, dtype: "float32", kind, offset, bytes, shape });
    const header = {
      tensors: [t("input", 0, 0, [-1, 16]), t("weight", 0, 4096), t("weight", 4096, 8192), t("weight", 12288, 64), t("activation", 0, 0)],
      ops: [
        { op: "Gather", name: "g", inputs: [1, 0], outputs: [4], attrs: { axis: 0 } },
        { op: "Gather", name: "h", inputs: [2, 0], outputs: [4], attrs: { axis: 0 } },
        { op: "MatMul", name: "head", inputs: [4, 2], outputs: [4], attrs: {} },
        { op: "Gather", name: "c", inputs: [3, 4], outputs: [4], attrs: { axis: 0 } },
      ],
    };
    const plan = { header, blob: new Uint8Array(12352), fileLength: 20000 } as unknown as Parameters<typeof planTables>[0];
    // The blob ends the file: a weight at blob offset 0 lies at 20000 - 12352.
    expect(planTables(plan)).toEqual([{ offset: 20000 - 12352, bytes: 4096, idsPerSample: 16 }]);
  });
});
