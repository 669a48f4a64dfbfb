/**
 * What changes for a distributed stage whose ranks span hosts (`distributed.nnodes > 1`,
 * `memlane run --rdzv-endpoint`): the ranks talk to the run's remote broker (CURVE) instead of
 * its local one, this host is node 0 of a static rendezvous, the other hosts' launchers are
 * started through their `memlane join`, and when the stage fails the root cause is picked
 * among every host's launcher. docs/distributed.md, "Two machines".
 */
import type { Broker } from "../../transport/broker.ts";
import type { Supervisor } from "../../workers/supervisor.ts";
import type { RemoteLauncher } from "../../workers/remote-nodes.ts";
import { OptionError } from "../options.ts";
import type { RemoteHosts } from "../remote-hosts.ts";
import type { RunSession } from "../session.ts";
import type { LauncherExit } from "./launch.ts";
import type { ResolvedDistributed } from "./options.ts";

export interface StageTransport {
  broker: Broker;
  /** Where this host's ranks connect. */
  endpoint: string;
  /** undefined: a free loopback port (single host). */
  rdzvEndpoint: string | undefined;
  /** Added to this host's launcher environment (the CURVE client keys on a multi-host stage). */
  env: Record<string, string>;
  /** 0 on a multi-host stage (static rendezvous, launch.ts), else undefined (c10d). */
  nodeRank: number | undefined;
  remote: RemoteHosts | undefined;
  /** The launchers' `--max-restarts`: the stage's retries on one host, 0 across hosts. */
  maxRestarts: number;
}

export function stageTransport(s: RunSession, stage: string, d: ResolvedDistributed, sup: Supervisor, retries: number): StageTransport {
  if (d.nnodes === 1) return { broker: sup.broker, endpoint: sup.endpoint, rdzvEndpoint: d.rdzvEndpoint, env: {}, nodeRank: undefined, remote: undefined, maxRestarts: retries };
  const remote = s.remote;
  if (!remote) {
    throw new OptionError(`stage "${stage}": distributed.nnodes`,
      "1, or other hosts to run on: `memlane run --rdzv-endpoint host:port` here and `memlane join` on each other host", d.nnodes);
  }
  if (d.rdzvEndpoint !== undefined && d.rdzvEndpoint !== remote.rdzvEndpoint) {
    s.notes.push(`stage "${stage}": rendezvous at ${remote.rdzvEndpoint} (--rdzv-endpoint), not the stage's ${d.rdzvEndpoint}`);
  }
  if (retries > 0) {
    // Measured: with a rank killed on one host, that host's launcher restarts alone while the
    // survivors' broken collectives fail their tasks; the static rendezvous (node 0 here) has no
    // group-wide restart. The stage runs once and says so.
    s.notes.push(`stage "${stage}": retries ${retries} not used: launcher restarts across hosts are not supported (static rendezvous); the stage ran once`);
  }
  return { broker: remote.broker, endpoint: remote.endpoint, rdzvEndpoint: remote.rdzvEndpoint, env: { ...remote.curveEnv }, nodeRank: 0, remote, maxRestarts: 0 };
}

/** A launcher's end, with the host it ran on. */
export type HostExit = LauncherExit & { host: string };

/**
 * How long, after the first launcher ends, the others get to report theirs before the root
 * cause is picked: a launcher on another host reports through its joiner only once it has
 * exited, seconds after its rank died (4.5 s measured: the agent's shutdown).
 */
const SETTLE_MS = 12_000;

/**
 * The first launcher (this host's or another's) to end, and after a wait for the others (until
 * one names a rank killed by a signal, all have ended, or SETTLE_MS), the exit that names the
 * root cause: a rank that died of a signal is the cause, the ranks a broken collective then
 * took down (exit code 1, on any host) are its consequences.
 */
export async function firstLauncherExit(local: Promise<HostExit>, remote: readonly RemoteLauncher[]): Promise<HostExit> {
  const all = [local, ...remote.map((r) => r.exited)];
  const first = await Promise.race(all);
  const settled: HostExit[] = [];
  const killed = (): HostExit | undefined => settled.find((e) => e.failure?.signal);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, SETTLE_MS);
    timer.unref();
    for (const p of all) {
      void p.then((e) => {
        settled.push(e);
        if (killed() || settled.length === all.length) {
          clearTimeout(timer);
          resolve();
        }
      });
    }
  });
  return killed() ?? settled.find((e) => e.failure) ?? first;
}
