/**
 * Starts the ranks of a distributed train stage through torch.distributed's own elastic
 * launcher (`python -m torch.distributed.run`, c10d rendezvous): memlane writes no launcher of
 * its own. Each rank the launcher starts is `python -m memlane_worker --rank-from-env`: a
 * memlane worker that connects to the broker and proves its rank's key (docs/distributed.md).
 *
 * `memlane_worker.launcher` is torch.distributed.run's `main`, unchanged, after asking the
 * kernel for SIGTERM when the orchestrator dies (torch's launcher does not watch its parent).
 * The launcher leads its own process group; its ranks each lead their own session, so they
 * are found through /proc (children.ts), sampled from their spawn, and killed by pid when the
 * launcher leaves any behind. The stage key travels in the environment, never in argv.
 */
import { createServer } from "node:net";
import { register } from "../../workers/cleanup.ts";
import { WorkerProcess } from "../../workers/process.ts";
import { REPO_ROOT, venvPython } from "../../workers/specs.ts";
import { ENV_MAX_MESSAGE_BYTES, ENV_PARENT_PID, ENV_WORKER_KEY } from "../../transport/protocol.ts";
import { ChildWatcher } from "./children.ts";
import { parseRootCause, type RankFailure } from "./failure.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface LaunchOptions {
  /** Ranks announce `<stage>@rank<RANK>` as their worker name. */
  stage: string;
  /** The broker endpoint the ranks `--connect` to. */
  endpoint: string;
  /** 32 random bytes; rank r proves rankKey(stageKey, r) (src/transport/auth.ts). */
  stageKey: Uint8Array;
  /** `--nproc-per-node` */
  nproc: number;
  /** `--nnodes` */
  nnodes: number;
  /** host:port of the c10d store. */
  rdzvEndpoint: string;
  /** `--rdzv-id`: the same on every host of the job. */
  rdzvId: string;
  /** `--rdzv-conf is_host=1`: this host serves the c10d store. */
  isHost: boolean;
  /**
   * Multi-host stages (remote-hosts.ts): this host's node rank, with the static rendezvous
   * (`--rdzv-backend static --node-rank`) instead of c10d. c10d orders nodes by their address
   * strings, so rank 0 (which writes the checkpoint into the run directory) could land on
   * another host; node rank 0 is always the orchestrator's host.
   */
  nodeRank?: number;
  /** `--max-restarts`: the stage's `retries`. */
  maxRestarts: number;
  /** Added to the launcher's environment (and so to every rank's). */
  env: Record<string, string>;
  maxMessageBytes: number;
  /** Every process to sample: the launcher (label `<stage>:launcher`) and each child it starts. */
  onProcess?(p: { pid: number; label: string; exited: Promise<unknown> }): void;
  /** Lines of the launcher's stderr (its own log and the ranks'), for the progress log. */
  forward?: (line: string) => void;
}

export interface LauncherExit {
  exitCode: number | undefined;
  signal: NodeJS.Signals | undefined;
  /** The failed rank as the launcher reported it, when it did. */
  failure: RankFailure | null;
  stderrTail: string;
}

export interface RankLauncher {
  readonly pid: number;
  readonly command: string[];
  readonly exited: Promise<LauncherExit>;
  /** SIGTERM the launcher's group (it stops its ranks), SIGKILL after a grace; then SIGKILL every child left. */
  stop(): Promise<LauncherExit>;
}

/** How long the launcher gets to stop its ranks after SIGTERM before it is killed. */
const LAUNCHER_STOP_GRACE_MS = 5000;
/** Enough stderr to hold the launcher's failure summary after the ranks' own tracebacks. */
const STDERR_TAIL_BYTES = 256 * 1024;

/** The launcher's argv after the interpreter: torch.distributed.run's options, then the worker's. */
export function launcherArgs(o: Pick<LaunchOptions, "nproc" | "nnodes" | "rdzvEndpoint" | "rdzvId" | "isHost" | "maxRestarts" | "nodeRank">, logDir?: string): string[] {
  const rendezvous = o.nodeRank === undefined
    ? ["--rdzv-backend", "c10d", "--rdzv-endpoint", o.rdzvEndpoint, "--rdzv-id", o.rdzvId, "--rdzv-conf", `is_host=${o.isHost ? 1 : 0}`]
    : ["--rdzv-backend", "static", "--rdzv-endpoint", o.rdzvEndpoint, "--rdzv-id", o.rdzvId, "--node-rank", String(o.nodeRank)];
  return [
    // torch.distributed.run's own main, behind a PR_SET_PDEATHSIG so it ends with the orchestrator.
    "-u", "-m", "memlane_worker.launcher",
    "--nnodes", String(o.nnodes),
    "--nproc-per-node", String(o.nproc),
    ...rendezvous,
    "--max-restarts", String(o.maxRestarts),
    // Notice a dead rank within 0.1 s (the default in torch 2.13, said out loud).
    "--monitor-interval", "0.1",
    // Its per-attempt log folders: without one it makes torchelastic_* in TMPDIR and never
    // removes it (a `memlane join` host has no run scratch to hold it).
    ...(logDir !== undefined ? ["--log-dir", logDir] : []),
    "-m", "memlane_worker", "--rank-from-env",
    // WorkerProcess appends `--connect <endpoint> --name <stage>`: the worker's own options.
  ];
}

export function launchRanks(o: LaunchOptions): RankLauncher {
  const python = venvPython();
  // Removed once the launcher is gone (or at exit, with killNow).
  const logDir = mkdtempSync(join(o.env.TMPDIR ?? tmpdir(), "memlane-rank-logs-"));
  const removeLogDir = (): void => rmSync(logDir, { recursive: true, force: true });
  const args = launcherArgs(o, logDir);
  // The caller's variables first: the launcher's own settings are not theirs to replace.
  const env = {
    ...o.env,
    PYTHONPATH: join(REPO_ROOT, "python"),
    // torch 2.13 shares the rendezvous TCPStore with the ranks across restarts, with no
    // per-attempt prefix: after a restart a rank reads the previous attempt's gloo address and
    // fails ("connectFullMesh ... Connection refused"). Opting out gives every attempt a
    // fresh store, hosted by its rank 0.
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE: "1",
    // The launcher binds itself to this process's death and checks it is still its parent.
    [ENV_PARENT_PID]: String(process.pid),
  };
  const proc = new WorkerProcess({ name: o.stage, command: python, args, cwd: REPO_ROOT, env }, o.endpoint, {
    stderrTailBytes: STDERR_TAIL_BYTES,
    forward: o.forward,
    env: { [ENV_WORKER_KEY]: Buffer.from(o.stageKey).toString("hex"), [ENV_MAX_MESSAGE_BYTES]: String(o.maxMessageBytes) },
  });
  const pid = proc.pid;
  if (pid === undefined) {
    removeLogDir();
    throw new Error(`could not start torch.distributed.run for stage "${o.stage}" (${python})`);
  }
  o.onProcess?.({ pid, label: `${o.stage}:launcher`, exited: proc.exited });
  let seq = 0;
  // Every 250 ms: a rank spends longer than that starting Python before it allocates anything,
  // and a /proc scan on a busy host is not free for the orchestrator.
  const watcher = new ChildWatcher(pid, (child, exited) => o.onProcess?.({ pid: child, label: `${o.stage}:rank-process-${++seq}`, exited }), 250);
  const killNow = (): void => {
    proc.killNow();
    watcher.killAll();
    removeLogDir();
  };
  const exited = proc.exited.then((info) => {
    // The launcher is gone: whatever it left running (it was SIGKILLed) goes now.
    watcher.killAll();
    watcher.close();
    removeLogDir();
    const stderrTail = proc.stderrTail();
    return { exitCode: info.exitCode, signal: info.signal, failure: parseRootCause(stderrTail), stderrTail };
  });
  let stopping: Promise<LauncherExit> | undefined;
  const stop = (): Promise<LauncherExit> =>
    (stopping ??= proc.stop(0, LAUNCHER_STOP_GRACE_MS).then(() => exited));
  const unregister = register({ stop, killNow });
  void exited.then(unregister);
  return { pid, command: [python, ...args, "--connect", o.endpoint, "--name", o.stage], exited, stop };
}

/** A free TCP port on 127.0.0.1 for the c10d store (closed again before the launcher binds it). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
