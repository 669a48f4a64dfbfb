/**
 * What the orchestrator and a `memlane join` process say to each other, on the run's remote
 * broker (CURVE, src/transport/join-key.ts) and in the worker protocol's own messages: the
 * joiner's hello proves the key file's `joinSecret`, its capability is JOIN_CAPABILITY, and
 * each distributed stage is one task JOIN_LAUNCH_TASK that the joiner answers with progress
 * (the launcher's pid) and one result (how its launcher ended). docs/distributed.md.
 */
import type { RankFailure } from "../pipeline/distributed/failure.ts";

export const JOIN_CAPABILITY = "join";
export const JOIN_LAUNCH_TASK = "join.launch";
/** The progress label that carries the remote launcher's pid in `metrics.pid`. */
export const JOIN_LAUNCHED = "launcher-started";

/**
 * Args of JOIN_LAUNCH_TASK: what this host's launcher needs. Its paths (python, the worker
 * package) are its own, and the rendezvous endpoint is the one `memlane join` was given: the
 * address by which this host reaches the orchestrator's, which the orchestrator cannot know.
 */
export interface JoinLaunchArgs {
  stage: string;
  /** Hex of the stage key the ranks derive their keys from (contract: DIST-CONTRACT §3). */
  stageKey: string;
  nproc: number;
  nnodes: number;
  /** This host's node rank (1..nnodes-1; the orchestrator's host is 0): the static rendezvous. */
  nodeRank: number;
  rdzvId: string;
  maxRestarts: number;
  maxMessageBytes: number;
  /** Added to the launcher's environment: only the names {@link joinEnvAllowed} accepts; never keys. */
  env: Record<string, string>;
}

/** The result value of JOIN_LAUNCH_TASK. */
export interface JoinLaunchResult {
  host: string;
  launcherPid: number;
  exitCode: number | null;
  signal: string | null;
  failure: RankFailure | null;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The variables an orchestrator may set for a joined host's launcher: thread counts and the
 * collectives' network settings. Anything else (LD_PRELOAD, PATH, PYTHONSTARTUP, ...) would let
 * the orchestrator run code of its choosing on the joined host beyond the memlane worker.
 */
const JOIN_ENV_NAMES = new Set(["OMP_NUM_THREADS", "MKL_NUM_THREADS", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"]);
const JOIN_ENV_PREFIXES = ["NCCL_"];
export const joinEnvAllowed = (name: string): boolean => JOIN_ENV_NAMES.has(name) || JOIN_ENV_PREFIXES.some((p) => name.startsWith(p));

/** Checks the args of a launch task; the error names the field. */
export function checkJoinLaunchArgs(a: Record<string, unknown>): JoinLaunchArgs {
  const str = (k: string, re?: RegExp): string => {
    const v = a[k];
    if (typeof v !== "string" || v === "" || (re && !re.test(v))) throw new Error(`${JOIN_LAUNCH_TASK}: \`${k}\` is ${JSON.stringify(v)}`);
    return v;
  };
  const int = (k: string, min: number): number => {
    const v = a[k];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) throw new Error(`${JOIN_LAUNCH_TASK}: \`${k}\` must be an integer >= ${min}, got ${JSON.stringify(v)}`);
    return v;
  };
  const env = a.env ?? {};
  if (typeof env !== "object" || env === null || Array.isArray(env)) throw new Error(`${JOIN_LAUNCH_TASK}: \`env\` must be a map of strings`);
  for (const [k, v] of Object.entries(env)) {
    if (!ENV_NAME.test(k) || typeof v !== "string") throw new Error(`${JOIN_LAUNCH_TASK}: \`env.${k}\` must be a string variable`);
    if (k.startsWith("MEMLANE_")) throw new Error(`${JOIN_LAUNCH_TASK}: \`env.${k}\`: the joiner sets MEMLANE_ variables itself`);
    if (!joinEnvAllowed(k))
      throw new Error(`${JOIN_LAUNCH_TASK}: \`env.${k}\`: not a variable a joined host accepts (only ${[...JOIN_ENV_NAMES].join(", ")}, ${JOIN_ENV_PREFIXES.map((p) => `${p}*`).join(", ")})`);
  }
  if ((a.nodeRank as number) >= (a.nnodes as number)) throw new Error(`${JOIN_LAUNCH_TASK}: \`nodeRank\` ${String(a.nodeRank)} is not below nnodes ${String(a.nnodes)}`);
  return {
    stage: str("stage", /^[\w.@-]{1,100}$/),
    stageKey: str("stageKey", /^[0-9a-f]{64}$/),
    nproc: int("nproc", 1),
    nnodes: int("nnodes", 2),
    nodeRank: int("nodeRank", 1),
    rdzvId: str("rdzvId", /^[\w.-]{1,200}$/),
    maxRestarts: int("maxRestarts", 0),
    maxMessageBytes: int("maxMessageBytes", 1024),
    env: env as Record<string, string>,
  };
}

/** `host:port` (a name, IPv4, or [IPv6]) split; the error names the option. */
export function parseHostPort(text: string, option: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : 0;
  if (!m || port < 1 || port > 65535) throw new Error(`${option}: expected host:port (e.g. 10.0.0.1:29500), received ${JSON.stringify(text)}`);
  return { host: m[1]!, port };
}

/** The broker of a multi-host run listens on the rendezvous port + 1 unless told otherwise. */
export const defaultBrokerPort = (rdzvPort: number): number => rdzvPort + 1;

/**
 * Why a broker port (given, or derived from the rendezvous port) is no port, naming the
 * option to change; undefined when it is one.
 */
export function brokerPortProblem(given: number | undefined, rdzvPort: number): { option: string; expected: string; received: string } | undefined {
  if (given !== undefined)
    return Number.isInteger(given) && given >= 1 && given <= 65535 ? undefined : { option: "--broker-port", expected: "a port in 1..65535", received: String(given) };
  const derived = defaultBrokerPort(rdzvPort);
  return derived <= 65535 ? undefined : { option: "--broker-port", expected: `a port in 1..65535 (the default, the rendezvous port + 1, would be ${derived})`, received: "none" };
}
