import { describe, expect, it } from "vitest";
import { type Cell, cellKey, formatMarkdown, geomean, type ModelRow, ratio, splitRounds } from "../../bench/zoo-table.ts";

const cell = (nat: number[], ort: number[]): Cell => ({ native: nat.map((p50) => ({ p50, p99: 2 * p50 })), ort: ort.map((p50) => ({ p50, p99: p50 })) });
const row = (model: string, c: Cell, nat: number | null, ort: number | null): ModelRow =>
  ({ model, status: "ok", cells: new Map([[cellKey(1, 1), c]]), nativeOverheadMiB: nat, ortOverheadMiB: ort, maxAbsDiff: 1e-6 });

describe("bench:zoo table", () => {
  it("takes the ratio per round, its median, the geomean and the max model", () => {
    expect(ratio(cell([2, 6, 3], [1, 2, 3]), "p50")).toBe(2); // rounds: 2, 3, 1
    expect(geomean([1, 4])).toBeCloseTo(2);
    const rows = [
      row("a", cell([2], [1]), 4, 16),
      row("b", cell([1], [2]), 1, 4),
      { model: "c", status: "unsupported: op GatherND | node x", cells: new Map(), nativeOverheadMiB: null, ortOverheadMiB: null, maxAbsDiff: null },
    ];
    const md = formatMarkdown(rows, [cellKey(1, 1)], "# head");
    expect(md).toMatch(/\| a \| 2.00 \| 4.00 \| 0.25 \|/);
    expect(md).toMatch(/\| c \| unsupported: op GatherND \\\| node x \|/);
    expect(md).toMatch(/\| \*\*geomean\*\* \| 1.00 \| 2.00 \| 0.25 \|/);
    expect(md).toMatch(/\| \*\*max\*\* \| 2.00 a \| 4.00 a \| 0.25 a \|/);
    expect(md).toMatch(/\| a \| 2.00 \/ 1.00 \|/);
  });

  it("marks the ratios whose rounds began on a split placement and counts them", () => {
    const c2 = (trips: Array<number | null>): Cell => ({ ...cell([2, 2, 2], [1, 1, 1]), roundTripNs: trips });
    expect(splitRounds(c2([55, 320, null]), 150)).toBe(1);
    expect(splitRounds(cell([1], [1]), 150)).toBe(0); // not measured
    const two = (model: string, c: Cell): ModelRow => ({ ...row(model, c, 1, 4), cells: new Map([[cellKey(1, 2), c]]) });
    const md = formatMarkdown([two("a", c2([55, 320, 330])), two("b", c2([52, 60, 58]))], [cellKey(1, 2)], "# head", 150);
    expect(md).toMatch(/\| a \| 2.00† \| 4.00† \|/);
    expect(md).toMatch(/\| b \| 2.00 \| 4.00 \|/);
    expect(md).toMatch(/2 of 6 cell-rounds/);
    expect(md).toMatch(/against 59.00 ns median/);
    // Without the threshold (or with nothing measured) the table has no marks.
    expect(formatMarkdown([two("a", c2([320]))], [cellKey(1, 2)], "# head")).not.toMatch(/†/);
    expect(formatMarkdown([two("a", cell([2], [1]))], [cellKey(1, 2)], "# head", 150)).toMatch(/Placement not measured/);
  });
});
