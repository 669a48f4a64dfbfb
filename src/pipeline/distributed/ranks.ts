/**
 * The orchestrator's side of a distributed stage's ranks: one broker slot per global rank,
 * admitted only on the proof of that rank's key (rankKey(stageKey, r)), sent its task at its
 * hello, kept alive with heartbeats, and its phase marks, progress and result collected.
 *
 * The launcher may restart the whole group (`--max-restarts`): the new processes carry the
 * same ranks with a higher `hello.rank.restart`, so every slot is re-armed after each hello and
 * a newer generation replaces what an older one had sent.
 */
import { rankKey } from "../../transport/auth.ts";
import type { Broker, Peer } from "../../transport/broker.ts";
import { errorCodeName, PROTOCOL_VERSION, type Hello, type Message, type PhaseMark, type Progress, type RankIdentity } from "../../transport/protocol.ts";

export interface RankRun {
  rank: number;
  pid: number;
  host: string;
  restart: number;
  phases: PhaseMark[];
  result: Record<string, unknown>;
}

export interface RankSlotsOptions {
  stage: string;
  stageKey: Uint8Array;
  worldSize: number;
  task: string;
  args: Record<string, unknown>;
  /** A rank said hello (the sampler relabels its pid). */
  onAdmit?(rank: RankIdentity, pid: number): void;
  onProgress?(rank: number, p: Progress): void;
  heartbeatIntervalMs?: number;
  /** The launcher's `--max-restarts`: while a restart is left, a rank's task error may be void. */
  maxRestarts?: number;
  /** How long such an error waits for the restarted group's hello before it fails the stage. */
  restartWaitMs?: number;
}

/**
 * A rank killed by a signal breaks the gloo collective its peers are in: they report that as a
 * task error, which can reach us before the launcher has stopped them and restarted the group
 * (it did on a loaded machine). While a restart is left, such an error waits this long for the
 * next generation's hello, which voids it; a launcher that gives up ends the stage anyway.
 */
const RESTART_WAIT_MS = 30_000;

/** A task error a rank reported (a Python exception, nccl without CUDA...). */
export class RankTaskError extends Error {
  constructor(
    message: string,
    readonly rank: number,
    readonly pid: number,
    readonly host: string,
    readonly code: number,
    readonly traceback: string | undefined,
  ) {
    super(message);
    this.name = "RankTaskError";
  }
}

interface Slot {
  identity: RankIdentity;
  pid: number;
  peer: Peer;
  phases: PhaseMark[];
  result?: Record<string, unknown>;
}

export class RankSlots {
  readonly done: Promise<RankRun[]>;
  #resolve!: (runs: RankRun[]) => void;
  #reject!: (err: Error) => void;
  readonly #slots = new Map<number, Slot>();
  readonly #unexpect: Array<() => void> = [];
  #generation = 0;
  #closed = false;
  /** A task error held while the launcher may still restart the group (RESTART_WAIT_MS). */
  #heldError: NodeJS.Timeout | undefined;
  readonly #heartbeat: NodeJS.Timeout;
  #seq = 0;

  constructor(
    private readonly broker: Broker,
    private readonly o: RankSlotsOptions,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(() => {}); // the stage observes it; never unhandled here
    for (let r = 0; r < o.worldSize; r++) this.#arm(r);
    // A worker that hears nothing for its heartbeat timeout exits: keep every admitted rank talking.
    this.#heartbeat = setInterval(() => {
      for (const s of this.#slots.values()) this.#send(s.peer, { type: "heartbeat" });
    }, o.heartbeatIntervalMs ?? 2000);
    this.#heartbeat.unref(); // the stage holds the process open, not its heartbeat
  }

  /** Ranks admitted so far (latest generation): rank → pid and host. */
  admitted(): Array<{ rank: number; pid: number; host: string }> {
    return [...this.#slots.values()].map((s) => ({ rank: s.identity.rank, pid: s.pid, host: s.identity.host }));
  }

  #arm(r: number): void {
    if (this.#closed) return;
    const key = rankKey(this.o.stageKey, r);
    this.#unexpect.push(this.broker.expect({
      key,
      name: `${this.o.stage}@rank${r}`,
      onHello: (hello, peer) => {
        this.#arm(r); // the launcher may restart this rank: its next process is admitted too
        return this.#admit(r, hello, peer);
      },
      onRefused: (error) => this.#reject(new Error(`stage "${this.o.stage}": rank ${r} was refused: ${error.message}`)),
    }));
  }

  #admit(r: number, hello: Hello, peer: Peer) {
    const identity: RankIdentity = hello.rank ?? { rank: r, localRank: r, worldSize: this.o.worldSize, host: "?", restart: 0 };
    if (identity.rank !== r || identity.worldSize !== this.o.worldSize) {
      this.#reject(new Error(`stage "${this.o.stage}": the process proving rank ${r}'s key says it is rank ${identity.rank} of ${identity.worldSize} (expected ${r} of ${this.o.worldSize})`));
      return this.#turnAway(peer);
    }
    // A late hello of a group the launcher has already restarted: it must not take the slot.
    if (identity.restart < this.#generation) return this.#turnAway(peer);
    if (identity.restart > this.#generation) {
      // The launcher restarted the group: what the older processes sent is void, errors too.
      this.#generation = identity.restart;
      clearTimeout(this.#heldError);
      this.#heldError = undefined;
      for (const old of this.#slots.values()) this.broker.forget(old.peer.identity);
      this.#slots.clear();
    }
    const slot: Slot = { identity, pid: hello.pid, peer, phases: [] };
    this.#slots.set(r, slot);
    this.o.onAdmit?.(identity, hello.pid);
    const id = `${this.o.stage}-rank${r}-g${identity.restart}`;
    this.#send(peer, { type: "task", id, task: this.o.task, args: this.o.args });
    return {
      onMessage: (m: Message) => this.#onMessage(slot, m),
    };
  }

  /** A peer given no task: told to exit and forgotten by the broker. */
  #turnAway(peer: Peer): { onMessage: (m: Message) => void } {
    this.#send(peer, { type: "shutdown" });
    // The broker registers the returned handler after onHello: forget the peer once it has.
    queueMicrotask(() => this.broker.forget(peer.identity));
    return { onMessage: () => {} };
  }

  #onMessage(slot: Slot, m: Message): void {
    if (this.#slots.get(slot.identity.rank) !== slot) return; // an older generation's late words
    if (m.type === "phase") slot.phases.push(m);
    else if (m.type === "progress") this.o.onProgress?.(slot.identity.rank, m);
    else if (m.type === "result") {
      slot.result = typeof m.value === "object" && m.value !== null ? m.value : { value: m.value };
      this.#maybeDone();
    } else if (m.type === "error") {
      const who = `rank ${slot.identity.rank} (${this.o.stage}@rank${slot.identity.rank}, host ${slot.identity.host}, pid ${slot.pid})`;
      const err = new RankTaskError(`${who} failed: ${errorCodeName(m.code)}: ${m.message}`, slot.identity.rank, slot.pid, slot.identity.host, m.code, m.traceback);
      if (slot.identity.restart < (this.o.maxRestarts ?? 0)) {
        this.#heldError ??= setTimeout(() => this.#reject(err), this.o.restartWaitMs ?? RESTART_WAIT_MS);
        this.#heldError.unref();
      } else this.#reject(err);
    }
  }

  #maybeDone(): void {
    const slots = [...this.#slots.values()];
    if (slots.length < this.o.worldSize || slots.some((s) => !s.result)) return;
    this.#resolve(slots
      .sort((a, b) => a.identity.rank - b.identity.rank)
      .map((s) => ({ rank: s.identity.rank, pid: s.pid, host: s.identity.host, restart: s.identity.restart, phases: s.phases, result: s.result! })));
  }

  #send(peer: Peer, body: { type: string; [k: string]: unknown }): void {
    peer.send({ v: PROTOCOL_VERSION, id: `r-${++this.#seq}`, ...body }).catch(() => {});
  }

  /** Stops admitting, stops heartbeats, and asks every admitted rank to exit (shutdown). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#heldError);
    for (const u of this.#unexpect) u();
    for (const s of this.#slots.values()) {
      this.#send(s.peer, { type: "shutdown" });
      this.broker.forget(s.peer.identity);
    }
  }
}
