/**
 * Executes a train stage with `distributed`: binds the ranks' broker slots (ranks.ts), starts
 * torch.distributed.run (launch.ts), waits for every rank's result or the launcher's end, and
 * records per-rank phase marks for the report. The launcher's `--max-restarts` is the stage's
 * `retries`, so the stage itself is never retried by the scheduler (its error is not a
 * "worker died" one).
 */
import { newWorkerKey } from "../../transport/auth.ts";
import type { RunSession } from "../session.ts";
import type { DistributedRecord } from "../../report/distributed.ts";
import type { StageDef } from "../stages.ts";
import { adoptHeldout, trainArgs, type StageMeta, type TensorBytes, type TrainResult } from "../exec-model.ts";
import { describeRankFailure, type RankFailure } from "./failure.ts";
import { freePort, launchRanks, type LauncherExit, type RankLauncher } from "./launch.ts";
import { resolveDistributed } from "./options.ts";
import { RankSlots, type RankRun } from "./ranks.ts";
import { firstLauncherExit, stageTransport, type HostExit } from "./multi-host.ts";
import type { RemoteLauncher } from "../../workers/remote-nodes.ts";
import { hostname } from "node:os";

/** A distributed stage's failure: which rank, where, and how it ended. */
export class RankFailedError extends Error {
  readonly signal: string | undefined;
  readonly exitCode: number | undefined;
  constructor(message: string, readonly failure: RankFailure | null, launcher: LauncherExit) {
    super(message);
    this.name = "RankFailedError";
    this.signal = failure?.signal ?? undefined;
    this.exitCode = failure ? (failure.signal ? undefined : failure.exitCode) : launcher.exitCode;
  }
}

/** The worker task each rank runs (python/memlane_worker/tasks: train_rank.py). */
export const TRAIN_RANK_TASK = "train.rank";

const thisHost = hostname();

/** How long the ranks get to exit on their shutdown message before the launcher is stopped. */
const EXIT_GRACE_MS = 10_000;

export async function runDistributedTrain(
  s: RunSession,
  stage: Extract<StageDef, { kind: "train" }>,
  signal: AbortSignal,
  meta: StageMeta,
): Promise<TrainResult> {
  const o = stage.opts;
  const d = resolveDistributed(stage.name, o.distributed);
  meta.kind = TRAIN_RANK_TASK;
  meta.worker = "torch.distributed.run";
  const sup = await s.supervisor();
  if (signal.aborted) throw signal.reason;
  // One host: the run's broker. Several: its remote (CURVE) broker, and `memlane join` on the others.
  const t = stageTransport(s, stage.name, d, sup, stage.retries);
  const localPids = new Set<number>();
  const stageKey = newWorkerKey();
  const worldSize = d.nproc * d.nnodes;
  const threads = o.threads ?? s.options.threads;
  const rankEnv = { OMP_NUM_THREADS: String(threads), MKL_NUM_THREADS: String(threads) };
  const rdzvId = `${s.runId}-${stage.name}`.replace(/[^\w.-]/g, "-");
  const slots = new RankSlots(t.broker, {
    stage: stage.name,
    stageKey,
    worldSize,
    task: TRAIN_RANK_TASK,
    args: {
      ...trainArgs(o, s), strategy: d.strategy, backend: d.backend, allowCpuFallback: d.allowCpuFallback,
    },
    maxRestarts: t.maxRestarts,
    // A rank on another host is no process of this one's /proc (and its pid may equal a local
    // one's): only this host's launcher's children are sampled; the others have their phase marks.
    onAdmit: (rank, pid) => (localPids.has(pid) && rank.host === thisHost ? s.sampler.track(pid, `${stage.name}@rank${rank.rank}`) : undefined),
    onProgress: (rank, p) => {
      if (rank !== 0) return;
      const acc = p.metrics?.["accuracy"];
      s.progress.update(stage.name, p.current, p.total, `${p.label}${acc !== undefined ? ` held-out acc ${acc.toFixed(3)}` : ""} (rank 0 of ${worldSize})`);
    },
  });
  // From here on every path goes through the finally: the slots' heartbeat and broker
  // expectations, the launchers, and a wait for other hosts all end with the stage.
  let launcher: RankLauncher | undefined;
  const remotes: RemoteLauncher[] = [];
  // Ends the wait for other hosts when the stage ends first (its own launcher died, or it failed).
  const stageEnd = new AbortController();
  let launching: Promise<RemoteLauncher[]> | undefined;
  const onAbort = (): void => {
    stageEnd.abort(signal.reason);
    void launcher?.stop();
    for (const r of remotes) void r.stop();
  };
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    const rdzvEndpoint = t.rdzvEndpoint ?? `127.0.0.1:${await freePort()}`;
    launcher = launchRanks({
      stage: stage.name,
      endpoint: t.endpoint,
      stageKey,
      nproc: d.nproc,
      nnodes: d.nnodes,
      rdzvEndpoint,
      rdzvId,
      isHost: true,
      ...(t.nodeRank !== undefined ? { nodeRank: t.nodeRank } : {}),
      maxRestarts: t.maxRestarts,
      env: { ...rankEnv, ...(s.tmpDir ? { TMPDIR: s.tmpDir } : {}), ...t.env },
      maxMessageBytes: t.broker.maxMessageBytes,
      onProcess: (p) => {
        localPids.add(p.pid);
        s.trackProcess(p.pid, p.label, p.exited);
      },
    });
    meta.pid = launcher.pid;
    if (signal.aborted) throw signal.reason; // cancelled while the port was chosen: onAbort found no launcher to stop
    const localExit = launcher.exited.then((e) => ({ ...e, host: thisHost }));
    if (t.remote) {
      // Waits for the other hosts to have joined; this host's launcher waits in the rendezvous meanwhile.
      launching = t.remote.launch({
        stage: stage.name, stageKey: Buffer.from(stageKey).toString("hex"), nproc: d.nproc, nnodes: d.nnodes, rdzvId,
        maxRestarts: t.maxRestarts, maxMessageBytes: t.broker.maxMessageBytes, env: rankEnv,
      }, stageEnd.signal);
      remotes.push(...await Promise.race([launching, localExit.then((e) => Promise.reject(launcherFailed(stage.name, e, slots)))]));
    }
    const launchersEnd = firstLauncherExit(localExit, remotes);
    const first = await Promise.race([
      slots.done.then((runs) => ({ runs }), (err: unknown) => ({ err })),
      launchersEnd.then((exit) => ({ exit })),
    ]);
    if (signal.aborted) throw signal.reason;
    // A survivor's error (its gloo collective broken) can arrive before the launcher has
    // reported the killed rank: on one host usually not, but CI saw it; across hosts the killed
    // rank's launcher reports through its joiner, later. Either way the death is the cause.
    if ("err" in first) throw await causeOf(first.err, launchersEnd, stage.name, slots, t.remote ? CAUSE_WAIT_MS : LOCAL_CAUSE_WAIT_MS);
    if ("exit" in first) throw launcherFailed(stage.name, first.exit, slots);
    const runs = first.runs;
    slots.close(); // shutdown to every rank: they exit 0 and so does the launcher
    await Promise.race([Promise.all([launcher.exited, ...remotes.map((r) => r.exited)]), new Promise((r) => setTimeout(r, EXIT_GRACE_MS).unref())]);
    return await finish(s, stage, d, launcher, runs, meta, (r) => localPids.has(r.pid) && r.host === thisHost);
  } finally {
    signal.removeEventListener("abort", onAbort);
    stageEnd.abort(new Error(`stage "${stage.name}" ended`));
    slots.close();
    // Hosts taken just as the stage ended (the race above already lost) are stopped too.
    const late = launching ? await launching.catch((): RemoteLauncher[] => []) : [];
    for (const l of late) if (!remotes.includes(l)) remotes.push(l);
    await Promise.all([launcher?.stop(), ...remotes.map((r) => r.stop())]);
  }
}

/**
 * A rank's task error can be the echo of another rank's death: a gloo collective broken by a
 * killed peer fails on the survivors (on another host its launcher reports the death only
 * later). Give the launchers a moment; a rank they saw killed by a signal is the cause.
 */
async function causeOf(err: unknown, launchersEnd: Promise<HostExit>, stage: string, slots: RankSlots, waitMs: number): Promise<unknown> {
  const exit = await Promise.race([launchersEnd, new Promise<undefined>((r) => setTimeout(() => r(undefined), waitMs).unref())]);
  return exit?.failure?.signal ? launcherFailed(stage, exit, slots) : err;
}

/** How long a rank's task error waits for a launcher to name a killed rank instead (its launcher's end, then the settling of multi-host.ts). */
const CAUSE_WAIT_MS = 20_000;
/** The same on one host, where the launcher sees its rank die itself (a real Python error in a rank costs this much more before the stage fails). */
const LOCAL_CAUSE_WAIT_MS = 5_000;

function launcherFailed(stage: string, exit: HostExit, slots: RankSlots): Error {
  // The launcher names the host by its FQDN; the rank's own hello names it as the rank saw
  // itself (socket.gethostname, what the rest of the report uses): prefer that one.
  const seen = exit.failure && slots.admitted().find((r) => r.rank === exit.failure!.rank && r.pid === exit.failure!.pid);
  const f = exit.failure && seen ? { ...exit.failure, host: seen.host } : exit.failure;
  const how = exit.signal ? `was killed by ${exit.signal}` : exit.exitCode === undefined ? "was lost" : `exited with code ${exit.exitCode}`;
  const launcher = `torch.distributed.run on host ${exit.host}`;
  if (f) {
    return new RankFailedError(`stage "${stage}": ${describeRankFailure(f)}; ${launcher} ${how} and stopped the other ranks`, f, exit);
  }
  const known = slots.admitted().map((r) => `rank ${r.rank} pid ${r.pid} on ${r.host}`).join(", ") || "none admitted";
  const tail = exit.stderrTail.trim().split("\n").slice(-15).join("\n");
  return new RankFailedError(`stage "${stage}": ${launcher} ${how} before every rank finished (ranks: ${known}); its stderr ends:\n${tail}`, null, exit);
}

async function finish(
  s: RunSession,
  stage: Extract<StageDef, { kind: "train" }>,
  d: ReturnType<typeof resolveDistributed>,
  launcher: { pid: number; command: string[] },
  runs: RankRun[],
  meta: StageMeta,
  isLocal: (r: RankRun) => boolean,
): Promise<TrainResult> {
  const r0 = runs.find((r) => r.rank === 0)!.result as unknown as TrainResult & { backend: string; note: string | null };
  const record: DistributedRecord = {
    stage: stage.name, arch: r0.arch, strategy: d.strategy, backend: r0.backend, nproc: d.nproc, nnodes: d.nnodes,
    launcher, restarts: runs[0]!.restart, note: r0.note ?? null,
    ranks: runs.map((r) => ({
      rank: r.rank, pid: r.pid, host: r.host, local: isLocal(r), marks: r.phases,
      accuracy: Number(r.result["accuracy"]), tensorBytes: (r.result["tensorBytes"] as TensorBytes | undefined) ?? null,
    })),
  };
  s.distributed.push(record);
  if (r0.note) s.notes.push(`stage "${stage.name}": ${r0.note}`);
  if (record.restarts > 0)
    s.notes.push(`stage "${stage.name}": torch.distributed.run restarted the ranks ${record.restarts} time(s) (--max-restarts ${stage.retries}); the figures are those of the last attempt.`);
  await adoptHeldout(s, r0);
  meta.summary = `${d.strategy.toUpperCase()} ${runs.length} ranks (${r0.backend}): held-out accuracy ${r0.accuracy.toFixed(4)} after ${r0.epochs} epochs` +
    (record.restarts > 0 ? `, after ${record.restarts} launcher restart(s)` : "");
  const min = stage.opts.minAccuracy;
  if (min !== undefined && r0.accuracy < min) throw new Error(`held-out accuracy ${r0.accuracy.toFixed(4)} is below minAccuracy ${min}`);
  return r0;
}
