/**
 * A run's report says when another memlane run was active on the machine: one announced
 * before it started, and one that started while it ran. The "other run" is this test
 * process announcing itself the way every run does (src/pipeline/concurrent-runs.ts).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConcurrentRuns } from "../../src/pipeline/concurrent-runs.ts";
import type { Report } from "../../src/report/schema.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-concurrent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A python stage that waits long enough for the run to notice a run started meanwhile.
const pipelineFile = path.join(dir, "wait.ts");
writeFileSync(pipelineFile, `import { pipeline } from "memlane";
export default pipeline("concurrent").python("wait", async (py) => {
  await py.run("import time\\ntime.sleep(3)");
  return { waited: true };
});
`);

function report(out: string): Report {
  const [id] = readdirSync(out);
  return JSON.parse(readFileSync(path.join(out, id!, "report.json"), "utf8")) as Report;
}

describe("concurrent runs are flagged in the report", () => {
  it("another run active at the start, and another started during the run", async () => {
    const before = new ConcurrentRuns("20260101-000000-before");
    let during: ConcurrentRuns | undefined;
    try {
      const out = path.join(dir, "runs");
      const cli = startCli(["run", pipelineFile, "--out", out]);
      await cli.waitFor(/▶ wait/);
      during = new ConcurrentRuns("20260101-000000-during");
      const { code } = await cli.exit;
      expect(code, cli.stderr()).toBe(0);
      expect(await expectNoneLeft(cli.tag)).toEqual([]);
      const notes = report(out).notes!.join("\n");
      expect(notes).toMatch(new RegExp(`another memlane run was active when this run started: .*pid ${process.pid} \\(run 20260101-000000-before\\)`));
      expect(notes).toMatch(new RegExp(`another memlane run started during this run: .*pid ${process.pid} \\(run 20260101-000000-during\\)`));
      expect(notes).not.toMatch(/during\).*active when this run started/);
      expect(cli.stdout()).toMatch(/another memlane run was active when this run started/);
    } finally {
      before.close();
      during?.close();
    }
  });
});
