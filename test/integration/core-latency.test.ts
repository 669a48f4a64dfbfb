import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { coreRoundTripNs } from "../../bench/core-latency.ts";
import { REPO_ROOT } from "../../src/workers/specs.ts";

// bench:zoo's placement probe (native/runtime/tools/core_latency.cc): a real run of the tool.
const built = existsSync(join(REPO_ROOT, "native/build/runtime/memlane-core-latency"));

describe.skipIf(!built)("memlane-core-latency (skipped: the native build has not run)", () => {
  it("measures a round trip between two CPUs, or says there is one CPU", () => {
    const ns = coreRoundTripNs();
    if (cpus().length < 2) {
      expect(ns).toBeNull();
      return;
    }
    expect(ns).not.toBeNull();
    // A cache-line round trip: tens to hundreds of ns; a time slice (ms) would mean both threads on one CPU.
    expect(ns!).toBeGreaterThan(1);
    expect(ns!).toBeLessThan(100_000);
  });
});
