/**
 * The orchestrator's side of `memlane join`: the joiners that reached the remote broker and
 * proved the join secret, kept as a pool that distributed stages take nodes from. A node runs
 * one launch at a time (JOIN_LAUNCH_TASK); it is heartbeaten like a worker, and a node whose
 * joiner goes silent or whose connection is lost ends its launch as failed, naming its host.
 */
import type { LauncherExit } from "../pipeline/distributed/launch.ts";
import type { Broker, Peer, PeerHandler } from "../transport/broker.ts";
import { ErrorCode, PROTOCOL_VERSION, type Hello, type Message } from "../transport/protocol.ts";
import { JOIN_CAPABILITY, JOIN_LAUNCH_TASK, JOIN_LAUNCHED, type JoinLaunchArgs, type JoinLaunchResult } from "./join-protocol.ts";

export interface RemoteNodesOptions {
  heartbeatIntervalMs?: number;
  /** Silence after which a joiner counts as lost (default 15 s). */
  heartbeatTimeoutMs?: number;
  /** How long a stopped launch may take to report its end (default 15 s). */
  stopTimeoutMs?: number;
  log: (line: string) => void;
}

/** A launch on another host: its launcher's pid once known, and how it ended. */
export interface RemoteLauncher {
  readonly host: string;
  /** The remote torch.distributed.run pid (on `host`), once the joiner has reported it. */
  readonly pid: number | undefined;
  readonly exited: Promise<LauncherExit & { host: string }>;
  stop(): Promise<LauncherExit & { host: string }>;
}

/** How long a shutdown waits for the joiner's acknowledgement. */
const SHUTDOWN_ACK_MS = 2000;

export class RemoteNode {
  private lastSeen = Date.now();
  private current: { id: string; finish(exit: LauncherExit): void } | undefined;
  private seq = 0;
  private timer: NodeJS.Timeout;
  private gone: string | undefined;

  constructor(
    readonly host: string,
    /** The joiner's pid on its host. */
    readonly pid: number,
    private readonly peer: Peer,
    private readonly o: Required<Omit<RemoteNodesOptions, "log">> & Pick<RemoteNodesOptions, "log">,
    private readonly onGone: (node: RemoteNode) => void,
  ) {
    this.timer = setInterval(() => this.beat(), o.heartbeatIntervalMs);
    this.timer.unref();
  }

  get alive(): boolean {
    return this.gone === undefined;
  }

  /** Starts this host's ranks of a stage through its joiner. */
  launch(args: JoinLaunchArgs): RemoteLauncher {
    const id = `join-${this.host}-${++this.seq}`;
    let pid: number | undefined;
    let finish!: (exit: LauncherExit) => void;
    const exited = new Promise<LauncherExit & { host: string }>((resolve) => {
      finish = (exit) => {
        if (this.current?.id === id) this.current = undefined;
        resolve({ ...exit, host: this.host });
      };
    });
    if (this.gone) finish(this.lostExit(this.gone));
    else {
      if (this.current) throw new Error(`the joiner on ${this.host} is already running a launch`);
      this.current = {
        id,
        finish: (exit) => finish(exit),
      };
      this.handlers.set(id, (m) => {
        if (m.type === "progress" && m.label === JOIN_LAUNCHED && typeof m.metrics?.pid === "number") pid = m.metrics.pid;
        else if (m.type === "result") {
          const v = m.value as unknown as JoinLaunchResult;
          finish({
            exitCode: v.exitCode ?? undefined, signal: (v.signal ?? undefined) as NodeJS.Signals | undefined,
            failure: v.failure ?? null, stderrTail: "",
          });
        } else if (m.type === "error") {
          finish({ exitCode: undefined, signal: undefined, failure: null, stderrTail: `memlane join on ${this.host}: ${m.message}` });
        }
      });
      this.send({ type: "task", id, task: JOIN_LAUNCH_TASK, args });
    }
    let stopping: Promise<LauncherExit & { host: string }> | undefined;
    const stop = (): Promise<LauncherExit & { host: string }> => (stopping ??= (async () => {
      if (this.current?.id === id) this.send({ type: "cancel", id });
      const late = setTimeout(() => {
        const reason = `did not report its launcher's end within ${this.o.stopTimeoutMs} ms of a cancel`;
        // Its joiner may still run that launcher: the node is no longer fit for another stage.
        if (this.current?.id === id) this.abandon(reason);
        else finish(this.lostExit(reason));
      }, this.o.stopTimeoutMs);
      const exit = await exited;
      clearTimeout(late);
      return exit;
    })());
    const host = this.host;
    return { host, get pid() { return pid; }, exited, stop };
  }

  /**
   * Tells the joiner to exit (it stops any launcher it still runs); resolves when it has
   * acknowledged, or after SHUTDOWN_ACK_MS: the broker may close only once the word has left.
   */
  shutdown(): Promise<void> {
    if (this.gone) return Promise.resolve();
    const id = `shutdown-${this.host}-${++this.seq}`;
    const acked = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, SHUTDOWN_ACK_MS);
      this.handlers.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    this.send({ type: "shutdown", id });
    this.lose("shut down by the orchestrator");
    return acked;
  }

  /** Gives the node up (it answered no cancel): tells its joiner to exit and never hands it out again. */
  private abandon(reason: string): void {
    this.send({ type: "shutdown", id: `shutdown-${this.host}-${++this.seq}` });
    this.lose(reason);
  }

  private readonly handlers = new Map<string, (m: Message) => void>();

  handler(): PeerHandler {
    return {
      onMessage: (m) => {
        this.lastSeen = Date.now();
        if (m.type === "heartbeat" && !m.id.startsWith("shutdown-")) return;
        this.handlers.get(m.id)?.(m);
      },
      onLost: (reason) => this.lose(`its connection was lost (${reason})`),
    };
  }

  private beat(): void {
    const silent = Date.now() - this.lastSeen;
    if (silent > this.o.heartbeatTimeoutMs) this.lose(`stopped answering heartbeats (silent for ${silent} ms)`);
    else this.send({ type: "heartbeat", id: `hb-${this.host}-${++this.seq}` });
  }

  private lose(reason: string): void {
    if (this.gone) return;
    this.gone = reason;
    clearInterval(this.timer);
    this.current?.finish(this.lostExit(reason));
    this.onGone(this);
  }

  private lostExit(reason: string): LauncherExit {
    return { exitCode: undefined, signal: undefined, failure: null, stderrTail: `memlane join on ${this.host} (pid ${this.pid}) ${reason}` };
  }

  private send(body: Record<string, unknown>): void {
    this.peer.send({ v: PROTOCOL_VERSION, ...body }).catch(() => {});
  }
}

/** The joiners of a run: armed on the remote broker, taken by distributed stages. */
export class RemoteNodes {
  private readonly idle: RemoteNode[] = [];
  private readonly all = new Set<RemoteNode>();
  /** Pending {@link take}s: their check, and how to fail them when the pool closes. */
  private readonly waiters = new Map<() => void, (err: Error) => void>();
  private readonly unarm: (() => void)[] = [];
  private readonly o: Required<Omit<RemoteNodesOptions, "log">> & Pick<RemoteNodesOptions, "log">;
  private closed = false;

  /** Arms `capacity` joiner slots (the most other hosts any stage of the run needs). */
  constructor(private readonly broker: Broker, private readonly joinSecret: Uint8Array, capacity: number, options: RemoteNodesOptions) {
    this.o = { heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 15_000, stopTimeoutMs: 15_000, ...options };
    for (let i = 0; i < capacity; i++) this.arm();
  }

  /** Joiners connected and alive. */
  get connected(): number {
    return [...this.all].filter((n) => n.alive).length;
  }

  private arm(): void {
    if (this.closed) return;
    this.unarm.push(this.broker.expect({
      key: this.joinSecret,
      name: "memlane join",
      onHello: (hello: Hello, peer: Peer) => this.admit(hello, peer),
      onRefused: (error) => this.o.log(`memlane: a joiner was refused: ${error.message}`),
    }));
  }

  private admit(hello: Hello, peer: Peer): PeerHandler {
    const host = typeof (hello as { host?: unknown }).host === "string" ? String((hello as { host?: unknown }).host).slice(0, 100) : "?";
    const node = new RemoteNode(host, hello.pid, peer, this.o, (n) => this.drop(n));
    if (!hello.capabilities?.includes(JOIN_CAPABILITY)) {
      // It proved the join secret but is no joiner: nothing it could run.
      peer.send({ v: PROTOCOL_VERSION, type: "error", id: hello.id, code: ErrorCode.INVALID_ARGUMENT, message: `a peer with the join secret must say capability "${JOIN_CAPABILITY}"` }).catch(() => {});
      void node.shutdown();
      this.arm(); // the slot it took is free again
      return node.handler();
    }
    this.all.add(node);
    this.idle.push(node);
    this.o.log(`memlane: host ${host} joined (memlane join pid ${hello.pid})`);
    for (const w of [...this.waiters.keys()]) w();
    return node.handler();
  }

  private drop(node: RemoteNode): void {
    const i = this.idle.indexOf(node);
    if (i >= 0) this.idle.splice(i, 1);
    if (this.all.delete(node) && !this.closed) {
      this.o.log(`memlane: host ${node.host} left`);
      this.arm(); // the host may join again
    }
  }

  /** Waits for `n` idle joiners (at most `timeoutMs`); they are the caller's until {@link release}. */
  take(n: number, timeoutMs: number, signal?: AbortSignal): Promise<RemoteNode[]> {
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
        signal?.removeEventListener("abort", onAbort);
      };
      const check = (): void => {
        const live = this.idle.filter((x) => x.alive);
        if (live.length < n) return;
        done();
        const taken = live.slice(0, n);
        for (const t of taken) this.idle.splice(this.idle.indexOf(t), 1);
        resolve(taken);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${n} other host(s) needed, ${this.idle.length} joined within ${Math.round(timeoutMs / 1000)} s: ` +
          "run `memlane join --key <join key file> <rdzv host:port>` on each other host"));
      }, timeoutMs);
      timer.unref(); // a wait alone must not keep the process alive
      const onAbort = (): void => {
        done();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      if (this.closed) {
        done();
        reject(new Error("the run's remote hosts are closed"));
        return;
      }
      this.waiters.set(check, (err) => {
        done();
        reject(err);
      });
      check();
    });
  }

  /** Gives nodes back for a later stage. */
  release(nodes: readonly RemoteNode[]): void {
    for (const n of nodes) if (n.alive && !this.idle.includes(n)) this.idle.push(n);
    for (const w of [...this.waiters.keys()]) w();
  }

  /** Tells every joiner to exit (and waits for their acknowledgements) and stops waiting for new ones. */
  async close(): Promise<void> {
    this.closed = true;
    for (const u of this.unarm.splice(0)) u();
    for (const fail of [...this.waiters.values()]) fail(new Error("the run's remote hosts were closed while a stage waited for hosts to join"));
    await Promise.all([...this.all].map((n) => n.shutdown()));
  }
}
