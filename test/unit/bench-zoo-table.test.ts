import { describe, expect, it } from "vitest";
import { type Cell, cellKey, formatMarkdown, geomean, type ModelRow, ratio } from "../../bench/zoo-table.ts";

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
});
