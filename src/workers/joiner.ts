/**
 * `memlane join`: the process on another host that starts that host's ranks. It connects to
 * the orchestrator's remote broker over tcp with CURVE (the join key file's client keypair,
 * pinning its server key), proves the file's `joinSecret` in its hello, and for each
 * distributed stage runs torch.distributed.run (launch.ts) with `is_host=0`. The ranks it
 * starts connect to the same broker themselves, with the same CURVE keys in their environment:
 * the joiner relays nothing, it only launches, reports how its launcher ended, and stops it.
 *
 * It never outlives the run: it exits when the orchestrator says shutdown, when the
 * orchestrator goes silent (heartbeats), or on a signal, stopping its launcher (and every
 * rank the launcher left) first. docs/distributed.md, "Two machines".
 */
import { hostname } from "node:os";
import * as zmq from "zeromq";
import { launchRanks, type RankLauncher } from "../pipeline/distributed/launch.ts";
import { helloAuth } from "../transport/auth.ts";
import { decodeMessage, encodeEnvelope } from "../transport/codec.ts";
import { readJoinKey } from "../transport/join-key.ts";
import {
  DEFAULT_MAX_MESSAGE_BYTES, ENV_CURVE_PUBLIC_KEY, ENV_CURVE_SECRET_KEY, ENV_CURVE_SERVER_KEY, ErrorCode, PROTOCOL_VERSION,
  type Task,
} from "../transport/protocol.ts";
import { checkJoinLaunchArgs, defaultBrokerPort, JOIN_CAPABILITY, JOIN_LAUNCH_TASK, JOIN_LAUNCHED, parseHostPort, type JoinLaunchResult } from "./join-protocol.ts";

export interface JoinOptions {
  /** The join key file the orchestrator wrote (copied to this host). */
  keyFile: string;
  /** The orchestrator's rendezvous endpoint, host:port, as this host reaches it. */
  endpoint: string;
  /** The orchestrator's broker port (default: the rendezvous port + 1). */
  brokerPort?: number;
  /** Give up when the orchestrator has not answered the hello within this (default 120 s). */
  connectTimeoutMs?: number;
  /** Exit when an admitted orchestrator sends nothing for this long (default 30 s). */
  heartbeatTimeoutMs?: number;
  log: (line: string) => void;
}

/** Exit codes of `memlane join`. */
export const JOIN_EXIT = Object.freeze({ OK: 0, FAILED: 1, ORPHANED: 3 });

const POLL_MS = 250;

export async function runJoiner(o: JoinOptions): Promise<number> {
  const key = readJoinKey(o.keyFile);
  const { host, port } = parseHostPort(o.endpoint, "<endpoint>");
  const brokerEndpoint = `tcp://${host}:${o.brokerPort ?? defaultBrokerPort(port)}`;
  const me = hostname();
  const curveEnv = {
    [ENV_CURVE_SERVER_KEY]: key.server.publicKey,
    [ENV_CURVE_PUBLIC_KEY]: key.client.publicKey,
    [ENV_CURVE_SECRET_KEY]: key.client.secretKey,
  };
  const sock = new zmq.Dealer({
    linger: 1000, receiveTimeout: POLL_MS, maxMessageSize: DEFAULT_MAX_MESSAGE_BYTES,
    curveServerKey: key.server.publicKey, curvePublicKey: key.client.publicKey, curveSecretKey: key.client.secretKey,
  });
  let refused: string | undefined;
  // A refused handshake is retried by libzmq forever, silently: the events are the only word of it.
  const onRefused = (e: { error: Error }): void => {
    refused ??= `the orchestrator at ${brokerEndpoint} refused this host's CURVE handshake (${e.error.message}): ` +
      "is the key file the one the orchestrator wrote?";
  };
  sock.events.on("handshake:error:auth", onRefused);
  sock.events.on("handshake:error:protocol", onRefused);
  sock.events.on("handshake:error:other", onRefused);
  let chain: Promise<unknown> = Promise.resolve();
  const send = (m: object): void => {
    chain = chain.then(() => sock.send(encodeEnvelope({ v: PROTOCOL_VERSION, ...m }))).catch(() => {});
  };
  let launcher: RankLauncher | undefined;
  let code: number | undefined;
  const started = Date.now();
  let lastHeard = 0;
  try {
    sock.connect(brokerEndpoint);
    o.log(`memlane join: ${me} connecting to ${brokerEndpoint} (CURVE)`);
    const id = `join-${me}-${process.pid}`;
    send({
      type: "hello", id, pid: process.pid, auth: helloAuth(key.joinSecret, id, process.pid), worker: `join@${me}`,
      capabilities: [JOIN_CAPABILITY], versions: { node: process.version }, host: me,
    });
    while (code === undefined) {
      let parts: Buffer[] | undefined;
      try {
        parts = await sock.receive();
      } catch (err) {
        if ((err as { code?: string }).code !== "EAGAIN") throw err;
      }
      const now = Date.now();
      if (parts) lastHeard = now;
      if (refused) {
        o.log(`memlane join: ${refused}`);
        code = JOIN_EXIT.FAILED;
      } else if (!parts) {
        if (lastHeard === 0 && now - started > (o.connectTimeoutMs ?? 120_000)) {
          o.log(`memlane join: no answer from ${brokerEndpoint} within ${Math.round((now - started) / 1000)} s: ` +
            "is `memlane run --rdzv-endpoint` running there, and its broker port open?");
          code = JOIN_EXIT.FAILED;
        } else if (lastHeard > 0 && now - lastHeard > (o.heartbeatTimeoutMs ?? 30_000)) {
          o.log(`memlane join: the orchestrator has been silent for ${Math.round((now - lastHeard) / 1000)} s; stopping`);
          code = JOIN_EXIT.ORPHANED;
        }
      } else {
        code = handle(parts);
      }
    }
  } finally {
    if (launcher) await launcher.stop();
    await Promise.race([chain, new Promise((r) => setTimeout(r, 1000))]);
    sock.close();
  }
  return code;

  /** One message from the orchestrator; returns an exit code when the joiner is done. */
  function handle(parts: Buffer[]): number | undefined {
    const decoded = decodeMessage(parts);
    if (!decoded.ok) return undefined; // the orchestrator never sends these; nothing to answer
    const m = decoded.value.message;
    if (m.type === "heartbeat") send({ type: "heartbeat", id: m.id });
    else if (m.type === "shutdown") {
      // Acknowledged (a heartbeat with its id) so that the orchestrator closes its broker only
      // once the word has arrived; then the launcher, if any, is stopped on the way out.
      send({ type: "heartbeat", id: m.id });
      return JOIN_EXIT.OK;
    }
    else if (m.type === "error") {
      o.log(`memlane join: refused by the orchestrator: ${m.message}`);
      return JOIN_EXIT.FAILED;
    } else if (m.type === "cancel") {
      if (launcher) void launcher.stop();
    } else if (m.type === "task") launch(m);
    else send({ type: "error", id: m.id, code: ErrorCode.UNKNOWN_TYPE, message: `memlane join does not accept ${m.type} messages` });
    return undefined;
  }

  function launch(t: Task): void {
    const fail = (code: number, message: string): void => send({ type: "error", id: t.id, code, message });
    if (t.task !== JOIN_LAUNCH_TASK) return fail(ErrorCode.UNKNOWN_TASK, `memlane join runs only ${JOIN_LAUNCH_TASK}, not ${t.task}`);
    if (launcher) return fail(ErrorCode.INVALID_ARGUMENT, `memlane join on ${me} is already running the ranks of a stage`);
    let a: ReturnType<typeof checkJoinLaunchArgs>;
    try {
      a = checkJoinLaunchArgs(t.args);
    } catch (err) {
      return fail(ErrorCode.INVALID_ARGUMENT, (err as Error).message);
    }
    try {
      launcher = launchRanks({
        stage: a.stage, endpoint: brokerEndpoint, stageKey: Buffer.from(a.stageKey, "hex"), nproc: a.nproc, nnodes: a.nnodes,
        rdzvEndpoint: o.endpoint, rdzvId: a.rdzvId, isHost: false, nodeRank: a.nodeRank, maxRestarts: a.maxRestarts,
        env: { ...a.env, ...curveEnv }, maxMessageBytes: a.maxMessageBytes,
        forward: (line) => o.log(`[${me}] ${line}`),
      });
    } catch (err) {
      return fail(ErrorCode.TASK_FAILED, `memlane join on ${me} could not start torch.distributed.run: ${(err as Error).message}`);
    }
    const l = launcher;
    o.log(`memlane join: stage ${a.stage}: torch.distributed.run pid ${l.pid} (${a.nproc} rank(s) on ${me}, node ${a.nodeRank} of ${a.nnodes})`);
    send({ type: "progress", id: t.id, current: 0, total: 1, label: JOIN_LAUNCHED, metrics: { pid: l.pid } });
    void l.exited.then((exit) => {
      if (launcher === l) launcher = undefined;
      const value: JoinLaunchResult = {
        host: me, launcherPid: l.pid, exitCode: exit.exitCode ?? null, signal: exit.signal ?? null, failure: exit.failure,
      };
      o.log(`memlane join: stage ${a.stage}: torch.distributed.run exited ${exit.signal ?? exit.exitCode}`);
      send({ type: "result", id: t.id, value });
    });
  }
}
