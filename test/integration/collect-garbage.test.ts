// collectGarbage (src/workers/collect-garbage.ts) in this very process, as the orchestrator
// runs it before node-ort's phases: what memlane's own work left resident must go, V8's young
// generation included (full collections leave it grown).
import { getHeapSpaceStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { loadAddon } from "../../src/memory/gpu-addon.ts";
import { collectGarbage } from "../../src/workers/collect-garbage.ts";

const newSpaceMiB = () => (getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.physical_space_size ?? 0) / 2 ** 20;

describe("collectGarbage", () => {
  it("shrinks V8's young generation back after allocation pressure grew it (the addon's v8LowMemory)", () => {
    expect(loadAddon().v8LowMemory?.(), "the addon's v8LowMemory ran (built with V8's headers)").toBe(true);
    // Many short-lived small objects, some surviving a while: V8 grows its semi-spaces.
    let keep: Array<{ i: number; s: string }> = [];
    for (let i = 0; i < 3_000_000; i++) {
      keep.push({ i, s: `s${i}` });
      if (keep.length > 200_000) keep = [];
    }
    const grown = newSpaceMiB();
    expect(grown, "new space grew under the allocations").toBeGreaterThan(4);
    keep = [];
    expect(collectGarbage()).toBe(true);
    expect(newSpaceMiB(), `new space ${grown.toFixed(1)} MiB before`).toBeLessThan(2);
  });
});
