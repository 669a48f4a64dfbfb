// A zoo export of a model with an integer input feeds its ids, not standard normal floats:
// before, `.export({ zoo: "tiny-gpt" })` gave every benchmark a float32 set that torch's
// embedding refused (and that ORT's int64 input would have refused).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-zoo-int-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("zoo export of an int64-input model (real workers)", () => {
  it("feeds byte ids in the embedding's range to torch and ORT, which agree", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/zoo-int.ts", "--out", out, "-q"]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
    const [runId] = readdirSync(out);
    const r = JSON.parse(readFileSync(path.join(out, runId!, "report.json"), "utf8")) as Report;
    expect(r.inputs?.map((i) => [i.name, i.dtype, i.shape])).toEqual([["input", "int64", [-1, 64]]]);
    expect(r.inputs![0]!.values).toMatch(/^ids in \[0, 256\) \(indices of Gather/);
    expect(r.runtimes.map((x) => x.name).sort()).toEqual(["python-ort", "python-torch"]);
    expect(r.numerics!.reference).toBe("python-torch");
    const ort = r.numerics!.runtimes.find((x) => x.name === "python-ort")!;
    expect(ort.maxAbsDiff).not.toBeNull();
    expect(ort.maxAbsDiff!).toBeLessThan(1e-4);
  }, 120_000);

  it("benchmarks a trained int64-input model on torch from its checkpoint, with no export stage", async () => {
    const runs = mkdtempSync(path.join(out, "trained-"));
    const cli = startCli(["run", "test/integration/pipeline-fixtures/trained-int.ts", "--out", runs, "-q"]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
    const [runId] = readdirSync(runs);
    const r = JSON.parse(readFileSync(path.join(runs, runId!, "report.json"), "utf8")) as Report;
    const torch = r.runtimes.find((x) => x.name === "python-torch")!;
    expect(torch.phases.map((p) => p.name)).toEqual(["import", "runtime-create", "model-load", "first-inference", "steady-inference"]);
    expect(Object.keys(torch.latencyMs ?? {}).sort()).toEqual(["batch1", "batch4"]);
  }, 180_000);
});
