import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cmdline, expectNoneLeft, startCli, taggedPids } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-fail-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

function workerPid(cliPid: number, tag: string): number | undefined {
  return taggedPids(tag).find((p) => p !== cliPid && /memlane_worker/.test(cmdline(p)));
}

describe("memlane run failures leave no process behind", () => {
  it("a worker killed by SIGKILL mid-task: exit 1, the error names the stage, the worker and SIGKILL", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/long-train.ts", "--out", out]);
    await cli.waitFor(/train: epoch 1\//);
    const pid = workerPid(cli.child.pid!, cli.tag);
    expect(pid).toBeDefined();
    process.kill(pid!, "SIGKILL");
    const { code } = await cli.exit;
    const err = cli.stderr();
    expect(code, err).toBe(1);
    expect(err).toMatch(/stage "train" failed/);
    expect(err).toMatch(new RegExp(`worker: train \\(pid ${pid}\\)`));
    expect(err).toMatch(/SIGKILL/);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  });

  it("Ctrl-C (SIGINT to the CLI): exit 130 and every worker stopped", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/long-train.ts", "--out", out]);
    await cli.waitFor(/train: epoch 1\//);
    expect(workerPid(cli.child.pid!, cli.tag)).toBeDefined();
    cli.child.kill("SIGINT");
    const { code } = await cli.exit;
    expect(code, cli.stderr()).toBe(130);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  });

  it("usage errors exit 2 naming the option", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/small.ts", "--out"]);
    const { code } = await cli.exit;
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(/--out: expected a value/);
  });
});
