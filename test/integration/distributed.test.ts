/**
 * Distributed training through the CLI: 2 gloo ranks started by torch.distributed.run, DDP
 * and FSDP beside a single-process run of the same model (report.json's `distributed`), and a
 * rank killed mid-epoch (the stage names it; no process is left). Real processes, /proc.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DistributedReport, Report } from "../../src/report/schema.ts";
import { cmdline, expectNoneLeft, startCli, taggedPids } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-dist-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const PHASES = ["import", "init-process-group", "data-load", "model-wrap", "epoch-1", "epoch-2", "epoch-3", "checkpoint-save"];
/** Held-out accuracy of 2 ranks vs 1 process after 3 epochs: the same global batch, another shuffle order. */
const ACCURACY_TOLERANCE = 0.05;

function rankOf(pid: number): number | undefined {
  try {
    const m = /(?:^|\0)RANK=(\d+)\0/.exec(readFileSync(`/proc/${pid}/environ`, "latin1"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

describe("distributed train stage (2 gloo ranks)", () => {
  it("DDP and FSDP: per-rank phase rows, tensors measured per rank, accuracy as one process, nothing left", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/dist-small.ts", "--out", out]);
    const { code } = await cli.exit;
    expect(code, cli.stderr() + cli.stdout()).toBe(0);
    const runDir = path.join(out, readdirSync(out)[0]!);
    const report = JSON.parse(readFileSync(path.join(runDir, "report.json"), "utf8")) as Report;
    const single = report.training!;
    expect(single.stage).toBe("train-single");
    const s = single.tensorBytes!;
    expect(s.params).toBeGreaterThan(0);
    expect(s.grads).toBe(s.params);
    const dist = report.distributed!;
    expect(dist.map((d) => d.strategy)).toEqual(["ddp", "fsdp"]);
    const sampled = new Map(report.timeline.map((t) => [t.pid, t.samples.length]));
    for (const d of dist as DistributedReport[]) {
      expect(d.ranks.map((k) => k.rank)).toEqual([0, 1]);
      expect(new Set(d.ranks.map((k) => k.pid)).size).toBe(2);
      for (const k of d.ranks) {
        expect(k.phases.map((p) => p.name)).toEqual(PHASES);
        expect(k.phases.every((p) => p.rssMiB > 0 && p.peakRssMiB >= p.rssMiB - 0.01)).toBe(true);
        expect(sampled.get(k.pid) ?? 0, `rank ${k.rank} (pid ${k.pid}) sampled by the orchestrator`).toBeGreaterThan(0);
        expect(Math.abs(k.accuracy - single.accuracy), `${d.strategy} rank ${k.rank} vs single`).toBeLessThanOrEqual(ACCURACY_TOLERANCE);
      }
      expect(sampled.get(d.launcher.pid) ?? 0).toBeGreaterThan(0);
      const [b0, b1] = d.ranks.map((k) => k.tensorBytes!);
      if (d.strategy === "ddp") {
        // DDP replicates: every rank holds what the single process holds.
        for (const b of [b0!, b1!]) expect(b).toEqual(s);
      } else {
        // FSDP shards along dim 0: each rank holds part, and the shards add up to the whole.
        for (const b of [b0!, b1!]) {
          expect(b.params).toBeLessThan(s.params);
          expect(b.optimizer).toBeLessThan(s.optimizer);
        }
        expect(b0!.params + b1!.params).toBe(s.params);
        expect(b0!.grads + b1!.grads).toBe(s.grads);
      }
    }
    const md = readFileSync(path.join(runDir, "report.md"), "utf8");
    expect(md).toMatch(/### distributed train-fsdp: FSDP on 2 ranks/);
    expect(cli.stdout()).toMatch(/Distributed train-ddp: DDP on 2 ranks/);
    // Per-rank vs single figures in the test log (the report's closing note quotes them).
    console.log(cli.stdout().split("\n").filter((l) => /^(Distributed|process|single|rank|-)/.test(l)).join("\n"));
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  }, 600_000);

  it("tiny-gpt with FSDP and DDP: sharded tensors per FSDP rank, whole ones per DDP rank, accuracy as one process", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/dist-gpt.ts", "--out", out]);
    const { code } = await cli.exit;
    expect(code, cli.stderr() + cli.stdout()).toBe(0);
    const runs = readdirSync(out).sort();
    const report = JSON.parse(readFileSync(path.join(out, runs.at(-1)!, "report.json"), "utf8")) as Report;
    expect(report.pipeline).toBe("dist-gpt");
    const s = report.training!.tensorBytes!;
    expect(report.distributed!.map((x) => x.strategy)).toEqual(["fsdp", "ddp"]);
    const d = report.distributed![0]!;
    expect(d.arch).toBe("tiny-gpt");
    const ddp = report.distributed![1]!;
    for (const k of ddp.ranks) {
      expect(k.tensorBytes).toEqual(s);  // DDP replicates parameters, gradients and optimizer state
      expect(Math.abs(k.accuracy - report.training!.accuracy)).toBeLessThanOrEqual(ACCURACY_TOLERANCE);
    }
    // tiny-gpt's root holds a parameter of its own (pos, [1, 64, 96]: rank 0 has it whole,
    // rank 1 an empty shard): measured after resharding, the shards still add up to the whole.
    expect(d.ranks.reduce((a, k) => a + k.tensorBytes!.params, 0)).toBe(s.params);
    expect(d.ranks.reduce((a, k) => a + k.tensorBytes!.grads, 0)).toBe(s.grads);
    for (const k of d.ranks) {
      expect(k.phases.map((p) => p.name)).toEqual(["import", "init-process-group", "data-load", "model-wrap", "epoch-1", "checkpoint-save"]);
      expect(k.tensorBytes!.params).toBeLessThan(s.params * 0.6);
      expect(Math.abs(k.accuracy - report.training!.accuracy)).toBeLessThanOrEqual(ACCURACY_TOLERANCE);
    }
    console.log(cli.stdout().split("\n").filter((l) => /^(Distributed|process|single|rank|-)/.test(l)).join("\n"));
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  }, 600_000);

  it("a rank killed mid-epoch fails the stage naming rank, host, pid and signal; nothing is orphaned", async () => {
    const cli = startCli(["run", "test/integration/pipeline-fixtures/dist-long.ts", "--out", out]);
    await cli.waitFor(/train: epoch 1\//, 300_000);
    const ranks = taggedPids(cli.tag).filter((p) => /--rank-from-env/.test(cmdline(p)) && !/memlane_worker\.launcher/.test(cmdline(p)));
    const victim = ranks.find((p) => rankOf(p) === 1);
    expect(victim, `rank processes: ${ranks.map((p) => `${p} ${cmdline(p)}`).join("; ")}`).toBeDefined();
    process.kill(victim!, "SIGKILL");
    const { code } = await cli.exit;
    const err = cli.stderr();
    expect(code, err).toBe(1);
    expect(err).toMatch(/stage "train" failed/);
    expect(err).toMatch(new RegExp(`rank 1 \\(local rank 1\\) on host ${os.hostname()}, pid ${victim}, killed by SIGKILL`));
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
  }, 600_000);
});
