import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { coreRoundTripNs } from "../../bench/core-latency.ts";
import { REPO_ROOT } from "../../src/workers/specs.ts";

// bench:zoo's placement probe (native/runtime/tools/core_latency.cc): a real run of the tool.
const TOOL = join(REPO_ROOT, "native/build/runtime/memlane-core-latency");
const built = existsSync(TOOL);

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

  it.skipIf(cpus().length < 2)("measures a rewrite after the other CPU read the lines, against the writer's own", () => {
    const out = execFileSync(TOOL, ["2000"], { encoding: "utf8", timeout: 20_000 });
    const m = /^rewrite 1 MiB after cpu (\d+) read it ([\d.]+) us, own lines ([\d.]+) us$/m.exec(out);
    expect(m, out).not.toBeNull();
    const [afterRead, own] = [Number(m![2]), Number(m![3])];
    // 1 MiB of stores: microseconds to milliseconds; never nothing, never a time slice's worth.
    for (const us of [afterRead, own]) {
      expect(us).toBeGreaterThan(0.5);
      expect(us).toBeLessThan(100_000);
    }
  });
});
