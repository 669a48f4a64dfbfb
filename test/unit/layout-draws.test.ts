// The load probe's Python runs see environments of different sizes (src/estimate/layout-draws.ts):
// workers of one environment land on one level of held memory, so draws in one environment
// would all agree and the probe's range would hide the spread a benchmark worker may land in.
import { describe, expect, it } from "vitest";
import { LAYOUT_DRAW_VAR, LAYOUT_DRAWS, layoutDrawEnv } from "../../src/estimate/layout-draws.ts";

const size = (env: Record<string, string>) => Object.entries(env).reduce((a, [k, v]) => a + k.length + v.length + 2, 0);

describe("layout draws", () => {
  it("gives each of the probe's draws an environment of its own size, the first a plain worker's", () => {
    expect(LAYOUT_DRAWS).toBeGreaterThanOrEqual(3);
    expect(layoutDrawEnv(0)).toEqual({});
    const sizes = Array.from({ length: 3 * LAYOUT_DRAWS }, (_, i) => size(layoutDrawEnv(i)));
    expect(new Set(sizes).size).toBe(sizes.length);
    for (let i = 1; i < 3 * LAYOUT_DRAWS; i++) expect(Object.keys(layoutDrawEnv(i))).toEqual([LAYOUT_DRAW_VAR]);
  });
});
