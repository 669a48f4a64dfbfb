// A run sizes each benchmark's message limit by its eval set: the outputs of every eval sample
// come back from a runtime's worker in one message, and a decoder LM's logits over compare's
// default 256 samples (625 MiB at a vocabulary of 5000, seq 128) passed the default 256 MiB, so
// python-ort and native failed. Under maxMessageBytes "auto" (the default) a stage that needs
// more (evalSetMessageBytes, from the graph) gets a broker of its own with that limit; a fixed
// limit (compare's --max-message-mib) is kept, and a task over it fails naming it.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { mkdtempSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { evalSetMessageBytes } from "../../src/estimate/model-terms.ts";
import type { Report } from "../../src/report/schema.ts";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../src/transport/protocol.ts";
import { init, node, writeModel } from "../unit/compiler-onnx-builder.ts";
import { ORT_ONLY_OPS } from "../fixtures/ort-only-ops.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-compare-limit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A classifier head over a vocabulary of 5000: 20,000 bytes of logits a sample, 256 bytes in.
const HEAD = writeModel({ inputs: [["x", ["N", 64]]], outputs: ["logits"], inits: [init("w", [64, 5000])], nodes: [node("MatMul", ["x", "w"], ["logits"])] }, "head", dir);

describe("a run's message limit", () => {
  it("is what the eval set's inputs or outputs need, from the graph, compiled by memlane or not", () => {
    expect(evalSetMessageBytes(HEAD, undefined, 256)).toBe(20_000 * 256);
    expect(evalSetMessageBytes(HEAD, undefined, 20_000)).toBeGreaterThan(DEFAULT_MAX_MESSAGE_BYTES);
    // PReLU, TopK...: memlane's compiler refuses it; ORT's inference of it gives the outputs
    // (4 + 5 + 4 floats a sample) and the input (8·12·12 floats), the larger counts
    const refused = writeModel(ORT_ONLY_OPS, "ort-only", dir);
    expect(evalSetMessageBytes(refused, undefined, 10)).toBe(8 * 12 * 12 * 4 * 10);
  });

  it("fails a runtime naming the limit when --max-message-mib is below the eval set's outputs, and raises it past the default without it", async () => {
    const run = async (evalSamples: number, extra: string[]) => {
      const runs = mkdtempSync(path.join(dir, "runs-"));
      const c = startCli(["compare", HEAD, "--runtimes", "python-ort,native", "--batch", "1,8", "--iterations", "2", "--eval-samples", String(evalSamples), "-o", runs, "-q", ...extra]);
      const { code } = await c.exit;
      expect(await expectNoneLeft(c.tag), "processes left behind").toEqual([]);
      const [id] = readdirSync(runs);
      return { code, out: `${c.stdout()}\n${c.stderr()}`, report: JSON.parse(readFileSync(path.join(runs, id!, "report.json"), "utf8")) as Report };
    };
    // 128 samples × 20,000 B = 2.4 MiB of outputs in one reply, over a 1 MiB limit
    const tight = await run(128, ["--max-message-mib", "1"]);
    expect(tight.code).toBe(1);
    expect(tight.out).toMatch(/exceeds the limit of 1048576 bytes/);
    // 14,000 samples: 280 MB of outputs, over the default 256 MiB; the run raises its limit
    const sized = await run(14_000, []);
    expect(sized.code, sized.out).toBe(0);
    expect(sized.report.runtimes.map((r) => [r.name, r.phases.length])).toEqual([["python-ort", 5], ["native", 5]]);
    expect(sized.report.transport?.maxMessageBytes).toBeGreaterThan(20_000 * 14_000);
    expect(sized.report.transport?.refused.total).toBe(0);
    // said once a stage, naming the stage and the limit it got
    expect((sized.report.notes ?? []).filter((n) => /message limit raised to \d+ MiB for its eval set \(267\.0 MiB/.test(n)).map((n) => n.split(": ")[0])).toEqual([`stage "bench:python-ort"`, `stage "bench:native"`]);
  }, 180_000);
});
