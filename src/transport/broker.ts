/**
 * The orchestrator's one ZeroMQ ROUTER. A single receive loop decodes every message,
 * answers protocol violations with an `error` reply, and routes the rest by peer identity
 * to the handler that claimed that peer at its `hello`. Nothing a peer sends can throw out
 * of the loop, so one bad peer never stops the others from being served.
 */
import { rm } from "node:fs/promises";
import * as zmq from "zeromq";
import { decodeMessage, encodeEnvelope, FROM_WORKER } from "./codec.ts";
import { endpointToBind, resolveBrokerOptions, type BrokerOptions, type ResolvedBrokerOptions } from "./endpoint.ts";
import { ErrorCode, PROTOCOL_VERSION, type ErrorMessage, type Hello, type Message } from "./protocol.ts";
import { startZapHandler } from "./zap.ts";

/** Receives the messages of one claimed peer, in order. */
export interface PeerHandler {
  onMessage(message: Message, frames: Buffer[]): void;
}

/**
 * A worker the broker is waiting for. A hello is matched by `pid` (the child's pid as
 * spawned) or by `name` (the DEALER's routing id, or the hello's `id`), whichever matches.
 */
export interface Expectation {
  pid?: number;
  name?: string;
  /** The hello arrived with the right version: return the handler for its messages. */
  onHello(hello: Hello, peer: Peer): PeerHandler;
  /** The hello arrived with another version; the broker already replied VERSION_MISMATCH. */
  onRefused(error: ErrorMessage): void;
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

  private constructor(socket: zmq.Router, endpoint: string, options: ResolvedBrokerOptions, dir: string | undefined) {
    this.socket = socket;
    this.endpoint = endpoint;
    this.options = options;
    this.dir = dir;
    this.loop = this.receiveLoop();
  }

  /** Bind a ROUTER on loopback (tcp 127.0.0.1 ephemeral port by default) and start serving. */
  static async bind(options: BrokerOptions = {}): Promise<Broker> {
    const o = resolveBrokerOptions(options);
    // mandatory: a send to a peer that is gone fails (EHOSTUNREACH) instead of vanishing.
    // sendTimeout: with mandatory, a send to a dying peer can wait for room that never
    // comes; it must fail instead of stalling every send queued behind it.
    const socket = new zmq.Router({ mandatory: true, linger: 0, sendTimeout: SEND_TIMEOUT_MS });
    let zap: { close(): void } | undefined;
    if (o.curve) {
      if (o.curve.authorizedClients) zap = await startZapHandler(o.curve.authorizedClients, socket.context);
      socket.curveServer = true;
      socket.curveSecretKey = o.curve.secretKey;
      socket.curvePublicKey = o.curve.publicKey;
      if (zap) socket.zapDomain = "memlane";
    }
    const { bind, dir } = await endpointToBind(o);
    try {
      await socket.bind(bind);
    } catch (err) {
      socket.close();
      zap?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
      throw new Error(`broker could not bind ${bind}: ${(err as Error).message}`, { cause: err });
    }
    const broker = new Broker(socket, socket.lastEndpoint ?? bind, o, dir);
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
    this.sendChain = sent.catch(() => {});
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
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
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
      if (message.type === "error") return; // never answer an error with an error: no ping-pong
      this.reject(identity, ErrorCode.MALFORMED_MESSAGE, `first message must be hello, got ${message.type}`, message.id);
      return;
    }
    if (message.v !== PROTOCOL_VERSION) {
      this.reject(identity, ErrorCode.VERSION_MISMATCH, versionText(message.v), message.id);
      return;
    }
    if (!FROM_WORKER.has(message.type)) {
      this.reject(identity, ErrorCode.UNKNOWN_TYPE, `message type "${message.type}" only flows orchestrator → worker`, message.id);
      return;
    }
    handler.onMessage(message, frames);
  }

  private greet(identity: Buffer, hello: Hello): void {
    const routingId = identity.toString("utf8");
    let match: Expectation | undefined;
    for (const e of this.expected) {
      if ((e.pid !== undefined && e.pid === hello.pid) || (e.name !== undefined && (e.name === routingId || e.name === hello.id))) {
        match = e;
        break;
      }
    }
    if (hello.v !== PROTOCOL_VERSION) {
      const error = this.reject(identity, ErrorCode.VERSION_MISMATCH, versionText(hello.v), hello.id, {
        worker: hello.v,
        orchestrator: PROTOCOL_VERSION,
      });
      if (match) {
        this.expected.delete(match);
        match.onRefused(error);
      }
      return;
    }
    if (!match) {
      this.reject(identity, ErrorCode.INVALID_ARGUMENT, `no worker with pid ${hello.pid} or name "${hello.id}" was expected`, hello.id);
      return;
    }
    this.expected.delete(match);
    this.peers.set(identity.toString("hex"), match.onHello(hello, this.peer(identity)));
  }

  private reject(identity: Buffer, code: number, text: string, id?: string, details?: Record<string, unknown>): ErrorMessage {
    const error: ErrorMessage = {
      v: PROTOCOL_VERSION,
      type: "error",
      id: id ?? `broker-error-${++this.errorSeq}`,
      code,
      message: text,
      ...(details ? { details } : {}),
    };
    this.options.log(`broker: refused a message from peer ${identity.toString("hex")}: ${text}`);
    this.send(identity, error).catch(() => {}); // the peer may already be gone
    return error;
  }
}

const SEND_TIMEOUT_MS = 5000;

const versionText = (v: unknown): string => `worker speaks protocol v${String(v)}, orchestrator speaks v${PROTOCOL_VERSION}`;
