/**
 * A run's reach to other hosts (`memlane run --rdzv-endpoint host:port`): a second broker,
 * tcp with CURVE, that only multi-host stages use (the run's own broker stays ipc/loopback),
 * the join key file it authenticates with, and the pool of hosts that joined. A multi-host
 * stage starts its ranks here through the local launcher and through each joined host's
 * `memlane join`; every rank, local or remote, connects to this broker. docs/distributed.md.
 */
import { isIP } from "node:net";
import path from "node:path";
import { Broker } from "../transport/broker.ts";
import { loadOrCreateJoinKey } from "../transport/join-key.ts";
import { ENV_CURVE_PUBLIC_KEY, ENV_CURVE_SECRET_KEY, ENV_CURVE_SERVER_KEY } from "../transport/protocol.ts";
import type { RefusalSummary } from "../transport/refusals.ts";
import { defaultBrokerPort, parseHostPort, type JoinLaunchArgs } from "../workers/join-protocol.ts";
import { RemoteNodes, type RemoteLauncher } from "../workers/remote-nodes.ts";

/** `runPipeline`'s `remote` option. */
export interface RemoteRunOptions {
  /** host:port of the c10d store this host serves; the other hosts must reach it. */
  rdzvEndpoint: string;
  /** The join key file: read when it exists, else created (0600). Default `memlane-join-key.json` in the output directory. */
  joinKeyFile?: string;
  /** The broker's port (default: the rendezvous port + 1). */
  brokerPort?: number;
  /** How long a multi-host stage waits for its other hosts to join (default 300 s). */
  joinTimeoutMs?: number;
}

export const DEFAULT_JOIN_KEY_NAME = "memlane-join-key.json";

export class RemoteHosts {
  private constructor(
    readonly broker: Broker,
    readonly nodes: RemoteNodes,
    /** The rendezvous endpoint as given (this host's address as the others reach it). */
    readonly rdzvEndpoint: string,
    /** Where ranks on this host connect: the broker at the rendezvous host's address. */
    readonly endpoint: string,
    /** CURVE client keys for the ranks of this host (they connect to a CURVE broker too). */
    readonly curveEnv: Readonly<Record<string, string>>,
    readonly joinKeyFile: string,
    private readonly joinTimeoutMs: number,
  ) {}

  /**
   * Binds the remote broker and arms `capacity` joiner slots (the most other hosts a stage of
   * the run needs). `log` gets the lines a user needs to start the other hosts.
   */
  static async open(o: RemoteRunOptions, defaults: { outDir: string; capacity: number; maxMessageBytes: number; log(line: string): void }): Promise<RemoteHosts> {
    const { host, port } = parseHostPort(o.rdzvEndpoint, "--rdzv-endpoint");
    const brokerPort = o.brokerPort ?? defaultBrokerPort(port);
    const keyFile = path.resolve(o.joinKeyFile ?? path.join(defaults.outDir, DEFAULT_JOIN_KEY_NAME));
    const { key, created } = loadOrCreateJoinKey(keyFile);
    const bare = host.replace(/^\[|\]$/g, "");
    // An address binds that interface only; a host name could be any of several, so bind all
    // (CURVE with the ZAP allow-list guards the port either way).
    const bind = isIP(bare) ? `tcp://${host}:${brokerPort}` : `tcp://*:${brokerPort}`;
    const broker = await Broker.bind({
      endpoint: bind,
      allowRemote: { curve: { ...key.server, authorizedClients: [key.client.publicKey] } },
      maxMessageBytes: defaults.maxMessageBytes,
      log: (line) => defaults.log(`memlane (remote broker): ${line}`),
    });
    const nodes = new RemoteNodes(broker, key.joinSecret, defaults.capacity, { log: defaults.log });
    defaults.log(`memlane: multi-host run: rendezvous ${o.rdzvEndpoint}, broker ${bind} (CURVE); join key ${keyFile}${created ? " (new: copy it to each other host, mode 600)" : ""}`);
    defaults.log(`memlane: on each other host run: memlane join --key ${keyFile} ${o.rdzvEndpoint}${o.brokerPort !== undefined ? ` --broker-port ${brokerPort}` : ""}`);
    return new RemoteHosts(
      broker, nodes, o.rdzvEndpoint, `tcp://${host}:${brokerPort}`,
      Object.freeze({ [ENV_CURVE_SERVER_KEY]: key.server.publicKey, [ENV_CURVE_PUBLIC_KEY]: key.client.publicKey, [ENV_CURVE_SECRET_KEY]: key.client.secretKey }),
      keyFile, o.joinTimeoutMs ?? 300_000,
    );
  }

  /**
   * Starts the ranks of `nnodes - 1` other hosts (waits for them to join): one launch a host.
   * The hosts go back to the pool when their launches have ended.
   */
  async launch(args: Omit<JoinLaunchArgs, "nodeRank">, signal?: AbortSignal): Promise<RemoteLauncher[]> {
    const taken = await this.nodes.take(args.nnodes - 1, this.joinTimeoutMs, signal);
    if (signal?.aborted) {
      // The stage ended while the hosts were being handed over: no launch for a dead stage.
      this.nodes.release(taken);
      throw signal.reason;
    }
    // This host is node 0 (rank 0 writes the checkpoint into its run directory); the others follow.
    const launchers = taken.map((n, i) => n.launch({ ...args, nodeRank: i + 1 }));
    void Promise.allSettled(launchers.map((l) => l.exited)).then(() => this.nodes.release(taken));
    return launchers;
  }

  /** Tells every joiner to exit and closes the broker; returns what the broker refused. */
  async close(): Promise<RefusalSummary> {
    await this.nodes.close();
    await this.broker.close();
    return this.broker.refused();
  }
}
