import { describe, expect, it } from "vitest";
import { describeRankFailure, parseRootCause } from "../../src/pipeline/distributed/failure.ts";
import { launcherArgs } from "../../src/pipeline/distributed/launch.ts";
import { resolveDistributed } from "../../src/pipeline/distributed/options.ts";
import { pipeline } from "../../src/pipeline/builder.ts";
import { helloAuth, rankKey } from "../../src/transport/auth.ts";

// torch.distributed.run's ChildFailedError summary, as torch 2.13 prints it.
const SUMMARY = `
============================================================
memlane_worker FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_22:31:05
  host      : box.example
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4242)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
============================================================`;

describe("distributed stage pieces", () => {
  it("reads the failed rank, host, pid and signal from the launcher's summary", () => {
    const f = parseRootCause(`noise\n${SUMMARY}\n`)!;
    expect(f).toEqual({ rank: 1, localRank: 1, host: "box.example", pid: 4242, exitCode: -9, signal: "SIGKILL" });
    expect(describeRankFailure(f)).toBe("rank 1 (local rank 1) on host box.example, pid 4242, killed by SIGKILL");
    expect(describeRankFailure({ ...f, exitCode: 3, signal: null })).toMatch(/exited with code 3$/);
    expect(parseRootCause("Traceback: nothing like it")).toBeNull();
  });

  it("checks the distributed option at the builder, naming the field", () => {
    expect(() => pipeline("p").train({ arch: "digits-cnn", distributed: { nproc: 0, strategy: "ddp" } })).toThrow(/distributed\.nproc.*integer >= 1/);
    expect(() => pipeline("p").train({ arch: "digits-cnn", distributed: { nproc: 2, strategy: "zero" as "ddp" } })).toThrow(/distributed\.strategy.*"ddp", "fsdp"/);
    expect(() => pipeline("p").train({ arch: "digits-cnn", distributed: { nproc: 2, strategy: "ddp", backend: "mpi" as "gloo" } })).toThrow(/distributed\.backend/);
    // nnodes > 1 without an endpoint takes `memlane run --rdzv-endpoint`'s (checked when the stage starts).
    expect(resolveDistributed("t", { nproc: 1, strategy: "ddp", nnodes: 2 })).toMatchObject({ nnodes: 2, rdzvEndpoint: undefined });
    expect(() => pipeline("p").train({ arch: "digits-cnn", budget: { rssMiB: 1024 }, distributed: { nproc: 2, strategy: "ddp" } })).toThrow(/budget.*per-rank/);
    expect(() => resolveDistributed("t", { nproc: 2, strategy: "ddp", rdzvEndpoint: "nohost" })).toThrow(/host:port/);
    expect(resolveDistributed("t", { nproc: 2, strategy: "fsdp" })).toEqual({ nproc: 2, strategy: "fsdp", backend: "gloo", allowCpuFallback: false, nnodes: 1, rdzvEndpoint: undefined });
  });

  it("launches torch.distributed.run (behind a parent-death signal) with c10d, the stage's retries as --max-restarts, and no key in argv", () => {
    const args = launcherArgs({ nproc: 2, nnodes: 1, rdzvEndpoint: "127.0.0.1:29500", rdzvId: "r", isHost: true, maxRestarts: 3 });
    const opt = (k: string) => args[args.indexOf(k) + 1];
    expect(args.slice(0, 3)).toEqual(["-u", "-m", "memlane_worker.launcher"]); // torch.distributed.run's main
    expect([opt("--rdzv-backend"), opt("--max-restarts"), opt("--nproc-per-node"), opt("--rdzv-conf")]).toEqual(["c10d", "3", "2", "is_host=1"]);
    expect(args.slice(-3)).toEqual(["-m", "memlane_worker", "--rank-from-env"]);
    // A log folder memlane removes, else torch makes torchelastic_* in TMPDIR and leaves it.
    expect(launcherArgs({ nproc: 1, nnodes: 1, rdzvEndpoint: "127.0.0.1:1", rdzvId: "r", isHost: true, maxRestarts: 0 }, "/x/logs")).toContain("--log-dir");
    expect(args).not.toContain("--log-dir");
    // Several hosts: the static rendezvous with this host's node rank (rank 0 stays on node 0).
    const multi = launcherArgs({ nproc: 1, nnodes: 2, rdzvEndpoint: "10.0.0.1:29500", rdzvId: "r", isHost: false, maxRestarts: 0, nodeRank: 1 });
    const mopt = (k: string) => multi[multi.indexOf(k) + 1];
    expect([mopt("--rdzv-backend"), mopt("--node-rank"), mopt("--nnodes"), mopt("--rdzv-endpoint")]).toEqual(["static", "1", "2", "10.0.0.1:29500"]);
    expect(multi).not.toContain("--rdzv-conf");
  });

  it("derives one key per rank: a rank's proof does not verify for another rank or the stage key", () => {
    const stage = Buffer.alloc(32, 7);
    const [k0, k1] = [rankKey(stage, 0), rankKey(stage, 1)];
    expect(k0.equals(k1)).toBe(false);
    expect(helloAuth(k0, "id", 5)).not.toBe(helloAuth(k1, "id", 5));
    expect(helloAuth(k0, "id", 5)).not.toBe(helloAuth(stage, "id", 5));
    // Python derives the same (python/tests/test_auth.py checks this value).
    expect(rankKey(stage, 1).toString("hex")).toBe(RANK1_OF_SEVENS);
  });
});

const RANK1_OF_SEVENS = "27022dac1325deda8e6b397df6616705e86fd6ef8269e5c511bfcadc7d24592a";
