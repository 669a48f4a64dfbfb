/**
 * The orchestrator's one ZeroMQ ROUTER. A single receive loop decodes every message,
 * answers protocol violations with an `error` reply, and routes the rest by peer identity
 * to the handler that claimed that peer at its `hello`. Nothing a peer sends can throw out
 * of the loop, so one bad peer never stops the others from being served.
 *
 * A hello claims a waiting slot only when its `auth` proves that slot's per-spawn key
 * (auth.ts); after that the ROUTER identity (one per connection; handover off, so no second
 * connection can take it) is what ties messages to the slot. Every refusal is counted in a
 * bounded log (refusals.ts).
 */
import * as zmq from "zeromq";
import { verifyHelloAuth } from "./auth.ts";
import { decodeMessage, encodeEnvelope, FROM_WORKER } from "./codec.ts";
import { endpointToBind, removeIpcDir, resolveBrokerOptions, type BrokerOptions, type ResolvedBrokerOptions } from "./endpoint.ts";
import { ErrorCode, PROTOCOL_VERSION, type ErrorMessage, type Hello, type Message } from "./protocol.ts";
import { RefusalLog, ReplyBudget, type RefusalReason, type RefusalSummary } from "./refusals.ts";
import { curveServer } from "./zap.ts";

/** Receives the messages of one claimed peer, in order. */
export interface PeerHandler {
  onMessage(message: Message, frames: Buffer[]): void;
  /**
   * The peer is unreachable or was dropped (an oversized message, its connection closed by
   * the transport, or just its process exiting). `confirm` counts it as a `dropped` refusal:
   * call it only when the worker did not simply exit.
   */
  onLost?(reason: string, confirm: () => void): void;
}

/**
 * A worker the broker is waiting for. Its hello is matched by `key` alone: the slot goes to
 * the first hello whose `auth` this key verifies. `pid` and `name` only name it in logs.
 */
export interface Expectation {
  /** The per-spawn key (auth.ts newWorkerKey) the worker got in its environment. */
  key: Uint8Array;
  pid?: number;
  name?: string;
  /** The hello arrived with the right version: return the handler for its messages. */
  onHello(hello: Hello, peer: Peer): PeerHandler;
  /** The hello arrived with another version; the broker already replied VERSION_MISMATCH. */
  onRefused(error: ErrorMessage): void;
  /**
   * A hello claiming this slot's pid was refused for its auth. It proves nothing (anyone can
   * claim a pid), so the slot keeps waiting; the count only makes a hello timeout explicable.
   */
  onUnproven?(): void;
}

/** A connected peer: its ROUTER identity and a way to send to it. */
export interface Peer {
  readonly identity: Buffer;
  send(message: object, frames?: readonly Uint8Array[]): Promise<void>;
}

export class Broker {
  readonly endpoint: string;
  private readonly socket: zmq.Router;
  private readonly options: ResolvedBrokerOptions;
  private readonly dir: string | undefined;
  private readonly peers = new Map<string, PeerHandler>();
  private readonly expected = new Set<Expectation>();
  private sendChain: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly loop: Promise<void>;
  private zap: { close(): void } | undefined;
  private errorSeq = 0;
  private readonly refusals: RefusalLog;
  private readonly strangerReplies = new ReplyBudget();

  private constructor(socket: zmq.Router, endpoint: string, options: ResolvedBrokerOptions, dir: string | undefined, refusals: RefusalLog) {
    this.socket = socket;
    this.endpoint = endpoint;
    this.options = options;
    this.dir = dir;
    this.refusals = refusals;
    this.loop = this.receiveLoop();
  }

  /** The message size limit of this broker's socket and of the workers spawned on it. */
  get maxMessageBytes(): number {
    return this.options.maxMessageBytes;
  }

  /** Counts by reason and the first refusals of each reason (for the run's notes). */
  refused(): RefusalSummary {
    return this.refusals.summary();
  }

  /** Bind a ROUTER (ipc:// in a fresh 0700 directory by default; or loopback tcp) and start serving. */
  static async bind(options: BrokerOptions = {}): Promise<Broker> {
    const o = resolveBrokerOptions(options);
    // mandatory: a send to a peer that is gone fails (EHOSTUNREACH) instead of vanishing.
    // sendTimeout: with mandatory, a send to a dying peer can wait for room that never
    // comes; it must fail instead of stalling every send queued behind it.
    // maxMessageSize: libzmq refuses a bigger frame from its header, before allocating it, and
    // closes that connection. handover false (the default, said out loud): a second
    // connection announcing an identity already in use is ignored, so no peer can take over an
    // admitted worker's identity and speak as it.
    // A CURVE broker gets a context of its own: the ZAP handler's endpoint is one per context,
    // so two remote brokers in one process would collide on the shared one.
    const socket = new zmq.Router({
      ...(o.curve ? { context: new zmq.Context() } : {}),
      mandatory: true, linger: 0, sendTimeout: SEND_TIMEOUT_MS, handover: false, maxMessageSize: o.maxMessageBytes,
    });
    // Refusals of the CURVE handshake never reach the receive loop: the ZAP handler reports a
    // key it turned away, the socket's events the other failures (no CURVE, another server key).
    const refusals = new RefusalLog(o.log);
    const zap = o.curve
      ? await curveServer(socket, o.curve, (address, key) => refusals.add("curve", address, `CURVE client key ${key} from ${address} is not in the join key file`))
      : undefined;
    if (o.curve) countHandshakeFailures(socket, refusals);
    const { bind, dir } = await endpointToBind(o);
    try {
      await socket.bind(bind);
    } catch (err) {
      socket.close();
      zap?.close();
      if (dir) await removeIpcDir(dir);
      throw new Error(`broker could not bind ${bind}: ${(err as Error).message}`, { cause: err });
    }
    const broker = new Broker(socket, socket.lastEndpoint ?? bind, o, dir, refusals);
    broker.zap = zap;
    return broker;
  }

  /** Wait for a worker's hello; returns a function that stops waiting. */
  expect(expectation: Expectation): () => void {
    this.expected.add(expectation);
    return () => this.expected.delete(expectation);
  }

  /** Stop routing a peer's messages to its handler (its worker is gone). */
  forget(identity: Buffer): void {
    this.peers.delete(identity.toString("hex"));
  }

  /** Send `[identity, envelope, ...frames]`. Sends are serialized: zeromq allows one at a time. */
  send(identity: Buffer, message: object, frames: readonly Uint8Array[] = []): Promise<void> {
    if (this.closed) return Promise.reject(new Error("broker is closed"));
    const parts = [identity, encodeEnvelope(message), ...frames];
    const sent = this.sendChain.then(() => this.socket.send(parts));
    this.sendChain = sent.catch((err: { code?: string }) => {
      // mandatory: an admitted peer that is unreachable has lost its connection. libzmq drops a
      // connection that sends a frame over the limit without telling the application which
      // peer it was; the next send to it (a heartbeat, within heartbeatIntervalMs) finds out.
      if (err?.code === "EHOSTUNREACH") this.lose(identity, "its connection is gone (closed by the worker, or by the transport: a frame over the size limit or broken framing)");
    });
    return sent;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Let queued sends (a last shutdown message) leave, but never wait on them forever.
    await Promise.race([this.sendChain, new Promise((r) => setTimeout(r, SEND_TIMEOUT_MS).unref())]);
    this.socket.close();
    this.zap?.close();
    await this.loop;
    if (this.dir) await removeIpcDir(this.dir);
  }

  private peer(identity: Buffer): Peer {
    return { identity, send: (message, frames) => this.send(identity, message, frames) };
  }

  private async receiveLoop(): Promise<void> {
    try {
      for await (const [identity, ...parts] of this.socket) {
        if (!identity) continue;
        try {
          this.dispatch(identity, parts);
        } catch (err) {
          // A handler bug must not take the loop down with it.
          this.options.log(`broker: handler for peer ${identity.toString("hex")} threw: ${(err as Error).stack ?? err}`);
        }
      }
    } catch (err) {
      if (!this.closed) this.options.log(`broker: receive loop ended: ${(err as Error).message}`);
    }
  }

  private dispatch(identity: Buffer, parts: Buffer[]): void {
    const key = identity.toString("hex");
    // Each frame is bounded by libzmq already; their sum is not, so it is checked here.
    let size = 0;
    for (const p of parts) size += p.length;
    if (size > this.options.maxMessageBytes) {
      const text = `message of ${size} bytes in ${parts.length} frames exceeds the limit of ${this.options.maxMessageBytes} bytes`;
      this.reject(identity, ErrorCode.MALFORMED_MESSAGE, text, undefined, undefined, "oversized");
      this.lose(identity, `it sent a ${text}`, true); // counted as oversized already
      return;
    }
    const decoded = decodeMessage(parts);
    if (!decoded.ok) {
      this.reject(identity, decoded.error.code, decoded.error.message, decoded.error.id);
      return;
    }
    const { message, frames } = decoded.value;
    const handler = this.peers.get(key);
    if (message.type === "hello") {
      if (handler) {
        this.reject(identity, ErrorCode.MALFORMED_MESSAGE, "second hello from the same peer", message.id);
        return;
      }
      this.greet(identity, message as Hello);
      return;
    }
    if (!handler) {
      // Never answer an error with an error (no ping-pong), but count it.
      const text = `first message must be hello, got ${message.type}`;
      if (message.type === "error") this.refusals.add("unknown-peer", key, text);
      else this.reject(identity, ErrorCode.MALFORMED_MESSAGE, text, message.id, undefined, "unknown-peer");
      return;
    }
    if (message.v !== PROTOCOL_VERSION) {
      this.reject(identity, ErrorCode.VERSION_MISMATCH, versionText(message.v), message.id, undefined, "version");
      return;
    }
    if (!FROM_WORKER.has(message.type)) {
      this.reject(identity, ErrorCode.UNKNOWN_TYPE, `message type "${message.type}" only flows orchestrator → worker`, message.id);
      return;
    }
    handler.onMessage(message, frames);
  }

  /** An admitted peer is gone or dropped: stop routing to it and tell its handler once. */
  private lose(identity: Buffer, reason: string, counted = false): void {
    const key = identity.toString("hex");
    const handler = this.peers.get(key);
    if (!handler) return;
    this.peers.delete(key);
    let confirmed = counted;
    const confirm = (): void => {
      if (!confirmed) this.refusals.add("dropped", key, `admitted peer dropped: ${reason}`);
      confirmed = true;
    };
    try {
      handler.onLost?.(reason, confirm);
    } catch (err) {
      this.options.log(`broker: onLost of peer ${key} threw: ${(err as Error).message}`);
    }
  }

  private greet(identity: Buffer, hello: Hello): void {
    // The key alone picks the slot: pid, id and name are claims anyone can make.
    let match: Expectation | undefined;
    for (const e of this.expected) {
      if (verifyHelloAuth(e.key, hello.id, hello.pid, hello.auth)) {
        match = e;
        break;
      }
    }
    if (hello.v !== PROTOCOL_VERSION) {
      const error = this.reject(identity, ErrorCode.VERSION_MISMATCH, versionText(hello.v), hello.id, {
        worker: hello.v,
        orchestrator: PROTOCOL_VERSION,
      }, "version");
      if (match) {
        this.expected.delete(match);
        match.onRefused(error);
      }
      return;
    }
    if (!match) {
      const why = hello.auth === undefined ? "carries no auth" : "has an auth that no waiting worker's key verifies";
      this.reject(identity, ErrorCode.UNAUTHORIZED, `hello refused: it ${why} (pid ${String(hello.pid).slice(0, 24)}, id ${JSON.stringify(hello.id.slice(0, 80))})`, hello.id, undefined, "bad-auth");
      for (const e of this.expected) if (e.pid !== undefined && e.pid === hello.pid) e.onUnproven?.();
      return;
    }
    this.expected.delete(match);
    this.peers.set(identity.toString("hex"), match.onHello(hello, this.peer(identity)));
  }

  private reject(
    identity: Buffer, code: number, text: string, id?: string, details?: Record<string, unknown>, reason: RefusalReason = "malformed",
  ): ErrorMessage {
    const error: ErrorMessage = {
      v: PROTOCOL_VERSION,
      type: "error",
      id: id ?? `broker-error-${++this.errorSeq}`,
      code,
      message: text,
      ...(details ? { details } : {}),
    };
    const key = identity.toString("hex");
    this.refusals.add(reason, key, text);
    // A stranger gets a bounded number of answers (refusals.ts ReplyBudget); a worker all of them.
    if (this.peers.has(key) || this.strangerReplies.take(key)) this.send(identity, error).catch(() => {}); // the peer may already be gone
    return error;
  }
}

const SEND_TIMEOUT_MS = 5000;

/**
 * Counts the CURVE handshakes that fail for another reason than the ZAP handler's no (that one
 * it counts itself, with the key): a plain client, or one pinning another server key. libzmq
 * names only the local endpoint here, not the peer.
 */
function countHandshakeFailures(socket: zmq.Router, refusals: RefusalLog): void {
  const count = (what: string) => (e: { address: string; error: Error }): void =>
    refusals.add("curve", "", `CURVE handshake on ${e.address} failed (${what}: ${e.error.message}): a client without CURVE, or pinning another server key`);
  socket.events.on("handshake:error:protocol", count("protocol"));
  socket.events.on("handshake:error:other", count("other"));
}

const versionText = (v: unknown): string => `worker speaks protocol v${String(v)}, orchestrator speaks v${PROTOCOL_VERSION}`;
