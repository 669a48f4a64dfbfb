// Declared budgets end to end: a real python-ort worker measured through /proc, its budget
// checked against the report, the run failing with exit 1 and the report recording why.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-budgets-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("pipeline budgets (real worker)", () => {
  it("an exceeded budget fails the run with exit 1 after writing the report, naming runtime, phase, figure and limit", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/budget.ts", "--out", out, "-q"]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(1);
    expect(cli.stderr()).toMatch(/memlane: budget exceeded: python-ort: RSS at phase end \d+\.\d\d MiB in phase [a-z-]+ > limit 1\.00 MiB \(budget\.rssMiB of stage "bench:python-ort"\)/);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
    const [runId] = readdirSync(out);
    const r = JSON.parse(readFileSync(path.join(out, runId!, "report.json"), "utf8")) as Report;
    const row = r.runtimes.find((x) => x.name === "python-ort")!;
    const worst = Math.max(...row.phases.map((p) => p.rssMiB));
    expect(r.budgets!.map((b) => [b.runtime, b.figure, b.status])).toEqual([["python-ort", "rss", "exceeded"], ["python-ort", "uss", "ok"]]);
    expect(r.budgets![0]!.worstMiB).toBe(worst);
    expect(readFileSync(path.join(out, runId!, "report.md"), "utf8")).toMatch(/## Budgets/);
    // `memlane check` on the same run agrees with the budget, with the CLI's own flags.
    const check = startCli(["check", path.join(out, runId!), "--max-rss", `python-ort=${Math.floor(worst) - 1}`]);
    expect((await check.exit).code).toBe(1);
    const pass = startCli(["check", path.join(out, runId!), "--max-rss", `python-ort=${Math.ceil(worst) + 1}`]);
    expect((await pass.exit).code, pass.stderr()).toBe(0);
  }, 120_000);
});
