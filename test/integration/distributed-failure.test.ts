/**
 * Distributed stages when things go wrong: the launcher's restart (the stage's `retries`),
 * the orchestrator SIGKILLed mid-training (the launcher and its ranks go with it), and NCCL
 * without CUDA. Real processes, checked through /proc.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { cmdline, expectNoneLeft, startCli, taggedPids } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-distfail-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const rankPids = (tag: string): number[] =>
  taggedPids(tag).filter((p) => /--rank-from-env/.test(cmdline(p)) && !/memlane_worker\.launcher/.test(cmdline(p)));

function rankOf(pid: number): number | undefined {
  try {
    const m = /(?:^|\0)RANK=(\d+)\0/.exec(readFileSync(`/proc/${pid}/environ`, "latin1"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

function latestReport(): Report {
  const runs = readdirSync(out).sort();
  return JSON.parse(readFileSync(path.join(out, runs.at(-1)!, "report.json"), "utf8")) as Report;
}

describe("distributed stage failures", () => {
  it("retries 1: a rank killed mid-epoch makes the launcher restart the group, and the stage succeeds", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/dist-restart.ts", "--out", out]);
    await cli.waitFor(/train: epoch 1\//, 300_000);
    const victim = rankPids(cli.tag).find((p) => rankOf(p) === 1);
    expect(victim).toBeDefined();
    process.kill(victim!, "SIGKILL");
    const { code } = await cli.exit;
    expect(code, cli.stderr()).toBe(0);
    const d = latestReport().distributed![0]!;
    expect(d.restarts).toBe(1);
    expect(d.ranks.map((k) => k.pid)).not.toContain(victim);
    expect(d.ranks[0]!.phases.map((p) => p.name)).toContain("epoch-4");
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  }, 600_000);

  it("the orchestrator SIGKILLed mid-training: the launcher and every rank end too", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/dist-long.ts", "--out", out]);
    await cli.waitFor(/train: epoch 1\//, 300_000);
    expect(rankPids(cli.tag).length).toBe(2);
    cli.child.kill("SIGKILL");
    await cli.exit;
    // The launcher gets SIGTERM from the kernel (parent death) and stops its ranks.
    expect(await expectNoneLeft(cli.tag, 20_000)).toEqual([]);
  }, 600_000);

  it("nccl without CUDA: refused naming the backend; with allowCpuFallback it trains on gloo and says so", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/dist-nccl.ts", "--out", out]);
    const { code } = await cli.exit;
    const err = cli.stderr();
    expect(code, err).toBe(1);
    expect(cli.stdout() + err).toMatch(/fallback.*DDP 2 ranks \(gloo\)/);
    expect(err).toMatch(/stage "refused" failed/);
    expect(err).toMatch(/BACKEND_UNAVAILABLE: train\.rank: backend 'nccl' needs CUDA/);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  }, 600_000);
});
