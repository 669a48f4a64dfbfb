/**
 * One life of a worker: its process plus its protocol session (hello, heartbeats, tasks).
 * When the process ends, for whatever reason, every task still in flight is rejected with
 * one WorkerError that says which worker, how it ended and during which task.
 */
import { newWorkerKey } from "../transport/auth.ts";
import type { Broker, Peer, PeerHandler } from "../transport/broker.ts";
import { encodeTensors } from "../transport/codec.ts";
import { decodeTensorsShm, encodeTensorsShm, SHM_CAPABILITY, type ShmRegistry } from "../transport/shm.ts";
import {
  ENV_MAX_MESSAGE_BYTES, ENV_WORKER_KEY, ErrorCode, PROTOCOL_VERSION,
  type ErrorMessage, type Hello, type Message, type PhaseMark, type Result,
} from "../transport/protocol.ts";
import { register } from "./cleanup.ts";
import type { ResolvedSpawnOptions, RunOptions, TaskResult, WorkerSpec } from "./options.ts";
import { WorkerProcess, type ExitInfo } from "./process.ts";
import { describeExit, describeWorker, WorkerError, type WorkerIdentity } from "./worker-error.ts";

interface InFlight {
  task: string;
  options: RunOptions;
  phases: PhaseMark[];
  resolve(result: TaskResult): void;
  reject(error: WorkerError): void;
}

/** Why the orchestrator itself is ending this worker (set just before it kills it). */
interface Ending {
  code: number;
  reason: string;
  timedOut: boolean;
}

/** How long a worker whose connection is gone may take to exit on its own before it counts as dropped. */
const LOST_GRACE_MS = 500;

export class Incarnation {
  readonly proc: WorkerProcess;
  readonly ready: Promise<Hello>;
  hello: Hello | undefined;
  private peer: Peer | undefined;
  private readonly tasks = new Map<string, InFlight>();
  private readonly abandoned = new Map<string, NodeJS.Timeout>();
  private lastSeen = Date.now();
  private lastBeat = Date.now();
  private heartbeat: NodeJS.Timeout | undefined;
  private seq = 0;
  private ending: Ending | undefined;
  private stopping: Promise<ExitInfo> | undefined;

  constructor(
    private readonly broker: Broker,
    readonly spec: WorkerSpec,
    private readonly o: ResolvedSpawnOptions,
    private readonly shm?: ShmRegistry,
  ) {
    // A fresh key for this process alone: only the process holding it can claim the slot.
    const key = newWorkerKey();
    this.proc = new WorkerProcess(spec, broker.endpoint, {
      stderrTailBytes: o.stderrTailBytes,
      forward: o.forward,
      env: { [ENV_WORKER_KEY]: key.toString("hex"), [ENV_MAX_MESSAGE_BYTES]: String(broker.maxMessageBytes) },
    });
    const unregister = register(this);
    if (o.onProcess && this.proc.pid !== undefined) {
      try {
        o.onProcess({ name: spec.name, pid: this.proc.pid, exited: this.proc.exited });
      } catch {
        // The caller's hook must not leave a process without its session.
      }
    }
    this.ready = new Promise<Hello>((resolve, reject) => {
      let unproven = 0;
      const helloTimer = setTimeout(() => {
        // Hellos that claimed our pid without a valid auth: a worker that does not read its key
        // (or a forger); either way the slot was never claimed.
        const why = unproven > 0
          ? ` that proves its key (${unproven} hello(s) claiming pid ${this.proc.pid} were refused for their auth: does it read ${ENV_WORKER_KEY}?)`
          : "";
        this.endWith({ code: ErrorCode.TIMEOUT, timedOut: true, reason: `sent no hello${why} within ${o.helloTimeoutMs} ms` }, "SIGKILL");
      }, o.helloTimeoutMs);
      const unexpect = broker.expect({
        key,
        ...(this.proc.pid !== undefined ? { pid: this.proc.pid } : {}),
        name: spec.name,
        onHello: (hello, peer) => {
          clearTimeout(helloTimer);
          this.hello = hello;
          this.peer = peer;
          this.lastSeen = this.lastBeat = Date.now();
          this.heartbeat = setInterval(() => this.beat(), o.heartbeatIntervalMs);
          resolve(hello);
          return this.handler();
        },
        onUnproven: () => void unproven++,
        onRefused: (error: ErrorMessage) => {
          clearTimeout(helloTimer);
          this.endWith({ code: ErrorCode.VERSION_MISMATCH, timedOut: false, reason: `was refused: ${error.message}` }, "SIGTERM");
        },
      });
      void this.proc.exited.then((info) => {
        clearTimeout(helloTimer);
        clearInterval(this.heartbeat);
        unexpect();
        unregister();
        if (this.peer) this.broker.forget(this.peer.identity);
        for (const t of this.abandoned.values()) clearTimeout(t);
        if (!this.hello) reject(this.death(info, "before its hello"));
        for (const [id, t] of this.tasks) t.reject(this.death(info, `during task ${t.task}`).forTask(t.task, id));
        this.tasks.clear();
      });
    });
    this.ready.catch(() => {}); // observed by spawn(); never an unhandled rejection here
  }

  get identity(): WorkerIdentity {
    return { name: this.spec.name, pid: this.proc.pid };
  }

  get alive(): boolean {
    return this.proc.alive && this.ending === undefined && this.stopping === undefined;
  }

  run(task: string, args: Record<string, unknown>, options: RunOptions): Promise<TaskResult> {
    const peer = this.peer;
    if (!peer || !this.alive) {
      return Promise.reject(new WorkerError(`${describeWorker(this.identity)} is not running; cannot run task ${task}`, {
        code: ErrorCode.WORKER_DIED, worker: this.identity, task, stderrTail: this.proc.stderrTail(),
      }));
    }
    const id = `${this.spec.name}-${this.proc.pid}-t${++this.seq}`;
    if (options.signal?.aborted) {
      // Never sent, so nothing to cancel on the worker's side.
      return Promise.reject(new WorkerError(`task ${task} was cancelled before it started on ${describeWorker(this.identity)}`, {
        code: ErrorCode.CANCELLED, worker: this.identity, task, taskId: id, cause: options.signal.reason,
      }));
    }
    let encoded: ReturnType<typeof encodeTensorsShm>;
    try {
      encoded = this.encode(options.tensors ?? {});
    } catch (err) {
      return Promise.reject(new WorkerError(`task ${task}: could not put its tensors in shared memory: ${(err as Error).message}`, {
        code: ErrorCode.SHM_UNAVAILABLE, worker: this.identity, task, taskId: id, cause: err,
      }));
    }
    const { refs, frames, segment } = encoded;
    const tooBig = this.oversized(frames);
    if (tooBig) {
      if (segment) this.shm?.release(segment.name);
      return Promise.reject(new WorkerError(`task ${task}: ${tooBig}`, {
        code: ErrorCode.INVALID_ARGUMENT, worker: this.identity, task, taskId: id,
      }));
    }
    return new Promise<TaskResult>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => this.abandon(id, ErrorCode.CANCELLED, false, `task ${task} was cancelled`, options.signal?.reason);
      const settle = (): void => {
        clearTimeout(timer);
        // The worker has answered (its mapping, if any, outlives the name) or is gone.
        if (segment) this.shm?.release(segment.name);
        options.signal?.removeEventListener("abort", onAbort);
        this.tasks.delete(id);
      };
      this.tasks.set(id, {
        task, options, phases: [],
        resolve: (r) => (settle(), resolve(r)),
        reject: (e) => (settle(), reject(e)),
      });
      options.signal?.addEventListener("abort", onAbort, { once: true });
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => this.abandon(id, ErrorCode.TIMEOUT, true, `task ${task} timed out after ${options.timeoutMs} ms`), options.timeoutMs);
      }
      const envelope = { v: PROTOCOL_VERSION, type: "task", id, task, args, ...(refs.length ? { tensors: refs } : {}) };
      peer.send(envelope, frames).catch((err: Error) => {
        // A send fails when the worker's connection is gone ("Host unreachable"), nearly always
        // because the process is exiting: its exit (a signal, a code) says more than the
        // socket's error, and the exit handler rejects the task with it. The send error stands
        // only if the process is still there after the grace.
        const sendFailed = (): void => void this.tasks.get(id)?.reject(new WorkerError(`could not send task ${task} to ${describeWorker(this.identity)}: ${err.message}`, {
          code: ErrorCode.WORKER_DIED, worker: this.identity, task, taskId: id, cause: err, stderrTail: this.proc.stderrTail(),
        }));
        const timer = setTimeout(sendFailed, LOST_GRACE_MS);
        void this.proc.exited.then(() => (clearTimeout(timer), sendFailed()));
      });
    });
  }

  /**
   * Tensors of at least the registry's threshold go through shared memory when this worker
   * said it reads them (`shm` in hello.capabilities); everything else travels as frames.
   */
  private encode(tensors: NonNullable<RunOptions["tensors"]>): ReturnType<typeof encodeTensorsShm> {
    if (this.shm && this.hello?.capabilities?.includes(SHM_CAPABILITY)) return encodeTensorsShm(tensors, this.shm);
    return { ...encodeTensors(tensors), segment: null };
  }

  /**
   * What is wrong when a task's frames exceed the message limit: the worker's socket would
   * drop the connection for it. (The envelope itself is small; 64 KiB is kept for it.)
   */
  private oversized(frames: readonly Uint8Array[]): string | undefined {
    const limit = this.broker.maxMessageBytes;
    const total = frames.reduce((a, f) => a + f.byteLength, 0);
    if (total + 65_536 <= limit) return undefined;
    return `its tensors take ${total} bytes as frames, over the message limit of ${limit} bytes; ` +
      "raise maxMessageBytes for this run, or send them through shared memory";
  }

  /** Stop by escalation: shutdown message, SIGTERM, SIGKILL. In-flight tasks reject CANCELLED. */
  stop(): Promise<ExitInfo> {
    this.stopping ??= this.proc.stop(this.o.stopGraceMs, this.o.killGraceMs, this.peer ? () => this.send({ type: "shutdown" }) : undefined);
    return this.stopping;
  }

  killNow(): void {
    this.proc.killNow();
  }

  private handler(): PeerHandler {
    return {
      onMessage: (m, frames) => this.onMessage(m, frames),
      // The broker lost our peer. Usually the process is exiting (its exit explains itself);
      // if it still lives after a moment, its connection was dropped (a message over the limit):
      // nothing it sends can reach us any more, so end it now, not at the heartbeat timeout.
      onLost: (reason, confirm) => {
        this.peer = undefined;
        if (this.stopping || this.ending) return;
        const timer = setTimeout(() => {
          if (!this.proc.alive || this.stopping || this.ending) return;
          confirm();
          this.endWith({ code: ErrorCode.WORKER_DIED, timedOut: false, reason: `was dropped by the broker: ${reason}` }, "SIGTERM");
        }, LOST_GRACE_MS);
        void this.proc.exited.then(() => clearTimeout(timer));
      },
    };
  }

  private onMessage(m: Message, frames: Buffer[]): void {
    this.lastSeen = Date.now();
    if (m.type === "heartbeat" || m.type === "hello") return;
    const t = this.tasks.get(m.id);
    if (!t) {
      // The late answer of a task we gave up on: the worker did let go of it.
      const pending = this.abandoned.get(m.id);
      if (pending && (m.type === "result" || m.type === "error")) {
        clearTimeout(pending);
        this.abandoned.delete(m.id);
      } else if (m.type === "error" && this.o.forward) {
        this.o.forward(`[${this.spec.name}] error ${m.code}: ${m.message}`);
      }
      return;
    }
    try {
      if (m.type === "progress") t.options.onProgress?.(m);
      else if (m.type === "phase") {
        t.phases.push(m);
        t.options.onPhase?.(m);
      } else if (m.type === "result") this.finish(m, t, frames);
      else if (m.type === "error") {
        t.reject(new WorkerError(`task ${t.task} failed on ${describeWorker(this.identity)}: ${m.message}`, {
          code: m.code, worker: this.identity, task: t.task, taskId: m.id, stderrTail: this.proc.stderrTail(),
          ...(m.details ? { details: m.details } : {}), ...(m.traceback ? { traceback: m.traceback } : {}),
        }));
      }
    } catch (err) {
      // A caller's onProgress/onPhase threw, or a result could not be decoded: the task is
      // lost to the caller. A worker still at work on it is told to stop.
      const text = `task ${t.task}: handling its ${m.type} message threw: ${(err as Error).message}`;
      this.abandon(m.id, ErrorCode.TASK_FAILED, false, text, err, m.type !== "result");
    }
  }

  private finish(m: Result, t: InFlight, frames: Buffer[]): void {
    const value = typeof m.value === "object" && m.value !== null ? m.value : { value: m.value };
    t.resolve({ value, tensors: decodeTensorsShm(m.tensors, frames, this.shm?.addonPath), phases: t.phases, workerPid: this.proc.pid ?? -1 });
  }

  /** Give up on a task now (timeout, abort); the worker gets a cancel and cancelGraceMs to let go. */
  private abandon(id: string, code: number, timedOut: boolean, text: string, cause?: unknown, cancel = true): void {
    const t = this.tasks.get(id);
    if (!t) return;
    t.reject(new WorkerError(`${text} on ${describeWorker(this.identity)}`, {
      code, worker: this.identity, task: t.task, taskId: id, timedOut, stderrTail: this.proc.stderrTail(),
      ...(cause !== undefined ? { cause } : {}),
    }));
    if (!cancel || !this.proc.alive) return;
    this.send({ type: "cancel", id });
    this.abandoned.set(id, setTimeout(() => {
      this.endWith({ code: ErrorCode.TIMEOUT, timedOut: true, reason: `did not let go of task ${t.task} within ${this.o.cancelGraceMs} ms of its cancel` }, "SIGTERM");
    }, this.o.cancelGraceMs));
  }

  private beat(): void {
    const now = Date.now();
    // A late timer means our own event loop was blocked: the worker's replies may be
    // waiting unread in the socket, so judge its silence only on a punctual beat.
    const punctual = now - this.lastBeat < 2 * this.o.heartbeatIntervalMs;
    this.lastBeat = now;
    const silent = now - this.lastSeen;
    if (punctual && this.o.heartbeatTimeoutMs > 0 && silent > this.o.heartbeatTimeoutMs) {
      this.endWith({ code: ErrorCode.TIMEOUT, timedOut: true, reason: `stopped answering heartbeats (silent for ${silent} ms)` }, "SIGKILL");
      return;
    }
    this.send({ type: "heartbeat", id: `hb-${++this.seq}` });
  }

  /** The orchestrator ends this worker: record why (for the errors), then kill. */
  private endWith(ending: Ending, signal: "SIGTERM" | "SIGKILL"): void {
    if (this.ending || !this.proc.alive) return;
    this.ending = ending;
    clearInterval(this.heartbeat);
    if (signal === "SIGKILL") this.proc.kill("SIGKILL");
    else void this.proc.stop(0, this.o.killGraceMs);
  }

  private send(body: { type: string; id?: string }): void {
    this.peer?.send({ v: PROTOCOL_VERSION, id: `o-${++this.seq}`, ...body }).catch(() => {});
  }

  private death(info: ExitInfo, when: string): WorkerError {
    const w = describeWorker(this.identity);
    const how = describeExit(info.exitCode, info.signal);
    const e = this.ending;
    let code: number = ErrorCode.WORKER_DIED;
    let message = `${w} ${how} ${when}`;
    if (info.spawnError) message = `could not start ${w} (${this.spec.command}): ${info.spawnError.message}`;
    else if (e) {
      code = e.code;
      message = `${w} ${e.reason}; it ${how} ${when}`;
    } else if (this.stopping) {
      code = ErrorCode.CANCELLED;
      message = `${w} was stopped ${when}; it ${how}`;
    }
    return new WorkerError(message, {
      code, worker: this.identity, timedOut: e?.timedOut ?? false, stderrTail: this.proc.stderrTail(),
      ...(info.exitCode !== undefined ? { exitCode: info.exitCode } : {}),
      ...(info.signal !== undefined ? { signal: info.signal } : {}),
      ...(info.spawnError ? { cause: info.spawnError } : {}),
    });
  }
}
