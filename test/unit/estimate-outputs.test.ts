// The eval set's outputs are a term of their own (Features.evalOutputMiB), apart from its
// inputs (evalMiB): a worker holds what it returns as chunks and then joined, from another
// phase than its inputs, and a model with large outputs (an LM's logits) needs its own probe
// to say how much.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { features, modelTerms } from "../../src/estimate/model-terms.ts";
import { PROBES, writeProbes } from "../../src/estimate/probe-models.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-estimate-outputs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the eval set's outputs", () => {
  it("are counted apart from the inputs, and a probe moves them", async () => {
    const probe = PROBES.find((p) => p.name === "eval-outputs")!;
    const t = await modelTerms(writeProbes(dir, [probe]).get("eval-outputs")!);
    expect(t.outputPerSampleMiB! * 2 ** 20).toBe(65536 * 4);
    expect(t.ioPerSampleMiB! * 2 ** 20).toBe((65536 + 16) * 4);
    const f = features("python-ort", t, { maxBatch: 8, evalSamples: probe.evalSamples });
    expect(f.evalOutputMiB).toBe(64);
    expect(f.evalMiB).toBeCloseTo((256 * 16 * 4) / 2 ** 20, 9);
    // The other probes hold the outputs small next to it.
    const rest = writeProbes(dir, PROBES.filter((p) => p.name !== "eval-outputs" && p.name !== "mixed"));
    for (const [name, file] of rest) {
      const p = PROBES.find((x) => x.name === name)!;
      expect(features("python-ort", await modelTerms(file), { maxBatch: 8, evalSamples: p.evalSamples }).evalOutputMiB, name).toBeLessThan(1);
    }
  });
});
