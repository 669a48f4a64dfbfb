/**
 * Ranks on two hosts, for real: two network namespaces joined by a veth pair (netns.ts), each
 * with its own hostname (`unshare --uts`). The orchestrator runs in one (`memlane run
 * --rdzv-endpoint`), `memlane join` in the other; a 2-node x 1-rank gloo DDP training of the
 * digits CNN reaches one report over the CURVE broker, with each rank's host. A joiner with
 * another key file is refused and counted; a remote rank killed mid-training fails the stage
 * naming rank, host, pid and signal, and nothing is left in either namespace.
 *
 * Skips, saying why, where network namespaces cannot be made (not root, no `ip`, a sandbox
 * that refuses them).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOrCreateJoinKey } from "../../src/transport/join-key.ts";
import { createNetnsPair, netnsUnavailable, type NetnsPair } from "./netns.ts";
import { cmdline, expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const unavailable = netnsUnavailable();
if (unavailable) console.warn(`two-hosts.test.ts SKIPPED: ${unavailable}`);

const HOST_A = "memlane-host-a";
const HOST_B = "memlane-host-b";
const FIXTURE = "test/integration/pipeline-fixtures/two-hosts.ts";

describe.skipIf(unavailable !== undefined)("ranks on two hosts (two network namespaces)", () => {
  let pair: NetnsPair;
  let dir: string;
  beforeAll(() => {
    pair = createNetnsPair();
    dir = mkdtempSync(path.join(os.tmpdir(), "memlane-two-hosts-"));
  });
  afterAll(() => {
    pair?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * torch.distributed.run's log folders a host's launcher made in TMPDIR since `before`: a
   * joiner has no run scratch, so memlane gives the launcher a folder of its own and removes it.
   */
  const launcherLogsLeft = (before: ReadonlySet<string>) =>
    readdirSync(os.tmpdir()).filter((n) => /^(torchelastic_|memlane-rank-logs-)/.test(n) && !before.has(n));

  /** `memlane run` in namespace A and the join command line for B; GLOO_SOCKET_IFNAME: the veth, not the hostname's address. */
  function start(name: string, env: Record<string, string> = {}) {
    const rdzv = `${pair.a.addr}:29500`;
    const key = path.join(dir, `${name}-key.json`);
    const out = path.join(dir, `${name}-runs`);
    const orchestrator = startCli(["run", FIXTURE, "--rdzv-endpoint", rdzv, "--join-key", key, "-o", out],
      { GLOO_SOCKET_IFNAME: pair.a.dev, ...env }, pair.a.prefix(HOST_A));
    const join = (keyFile = key) => startCli(["join", "--key", keyFile, rdzv], { GLOO_SOCKET_IFNAME: pair.b.dev }, pair.b.prefix(HOST_B));
    return { orchestrator, join, out };
  }

  it("2 nodes x 1 gloo DDP rank: one report with each rank's host; a joiner with another key is refused", async () => {
    const tmpBefore = new Set(readdirSync(os.tmpdir()));
    const { orchestrator, join, out } = start("ok");
    await orchestrator.waitFor(/on each other host run: memlane join/, 60_000);
    const strangerKey = path.join(dir, "stranger.json");
    loadOrCreateJoinKey(strangerKey);
    const stranger = join(strangerKey);
    expect((await stranger.exit).code, stranger.stderr()).toBe(1);
    expect(stranger.stderr()).toContain("refused this host's CURVE handshake");
    const joiner = join();
    const [o, j] = await Promise.all([orchestrator.exit, joiner.exit]);
    expect(o.code, `orchestrator:\n${orchestrator.stderr()}\n${orchestrator.stdout()}\njoiner:\n${joiner.stderr()}`).toBe(0);
    expect(j.code, joiner.stderr()).toBe(0);
    expect(orchestrator.stderr()).toContain(`host ${HOST_B} joined`);

    const runDir = path.join(out, readdirSync(out).find((n) => /^\d{8}-/.test(n))!);
    const report = JSON.parse(readFileSync(path.join(runDir, "report.json"), "utf8")) as {
      distributed?: Array<{ nnodes: number; ranks: Array<{ rank: number; host: string; pid: number; phases: Array<{ name: string }> }> }>;
      notes?: string[];
    };
    const d = report.distributed?.[0];
    expect(d?.nnodes).toBe(2);
    expect(d!.ranks.map((r) => [r.rank, r.host])).toEqual([[0, HOST_A], [1, HOST_B]]);
    for (const r of d!.ranks) {
      expect(r.pid).toBeGreaterThan(0);
      expect(r.phases.map((p) => p.name)).toEqual(expect.arrayContaining(["init-process-group", "epoch-1", "epoch-2", "checkpoint-save"]));
    }
    // The stranger's handshakes were refused at the remote broker, and counted in the report
    // (other kinds may be counted beside them, e.g. unknown-peer, as far as its connection got).
    expect(report.notes?.find((n) => n.startsWith("remote broker"))).toMatch(/message\(s\) refused \((?:[^)]*, )?\d+ curve[,)]/);
    expect(launcherLogsLeft(tmpBefore)).toEqual([]);
    expect(await expectNoneLeft(orchestrator.tag)).toEqual([]);
    expect(await expectNoneLeft(joiner.tag)).toEqual([]);
    expect(pair.pids()).toEqual([]);
  }, 300_000);

  it("a rank killed on the other host fails the stage naming rank, host, pid and signal; the joiner exits, nothing is left", async () => {
    const tmpBefore = new Set(readdirSync(os.tmpdir()));
    const { orchestrator, join } = start("kill", { MEMLANE_TEST_EPOCHS: "40" });
    await orchestrator.waitFor(/on each other host run: memlane join/, 60_000);
    const joiner = join();
    // Mid-training: rank 0 has reported its first epoch, so both ranks are in their epochs.
    await orchestrator.waitFor(/epoch 1\/40/, 240_000);
    const rank = pair.pids().find((pid) => cmdline(pid).includes("--rank-from-env") && !cmdline(pid).includes("torch.distributed.run") &&
      readFileSync(`/proc/${pid}/environ`, "latin1").includes("RANK=1\0"));
    expect(rank, pair.pids().map((p) => `${p}: ${cmdline(p)}`).join("\n")).toBeDefined();
    process.kill(rank!, "SIGKILL");
    const [o, j] = await Promise.all([orchestrator.exit, joiner.exit]);
    expect(o.code, orchestrator.stderr()).toBe(1);
    expect(orchestrator.stderr(), `joiner:\n${joiner.stderr()}`).toContain(`rank 1 (local rank 0) on host ${HOST_B}, pid ${rank}, killed by SIGKILL`);
    expect(j.code, joiner.stderr()).toBe(0);
    expect(launcherLogsLeft(tmpBefore)).toEqual([]);
    expect(await expectNoneLeft(orchestrator.tag)).toEqual([]);
    expect(await expectNoneLeft(joiner.tag)).toEqual([]);
    expect(pair.pids()).toEqual([]);
  }, 300_000);
});
