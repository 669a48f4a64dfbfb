/**
 * What one run holds while its stages execute: the run directory, the supervisor (bound on
 * first use), the memory sampler, and the records the report is built from. Every worker a
 * stage starts is fresh, tracked by the sampler from its spawn (its start-up before the hello
 * included) until it exits, and stopped by the stage.
 */
import type { CheckpointLoadRecord, RuntimeRecord, TrainingRecord } from "../report/build.ts";
import type { GpuReport, StageReport, TransportReport } from "../report/schema.ts";
import { MemorySampler, type GpuProbe } from "../memory/sampler.ts";
import { Supervisor } from "../workers/supervisor.ts";
import type { ShmRegistry } from "../transport/shm.ts";
import { describeRefusals, mergeRefusals } from "../transport/refusals.ts";
import type { Tensor } from "../transport/codec.ts";
import type { WorkerHandle } from "../workers/handle.ts";
import type { RunOptions as TaskRunOptions, TaskResult, WorkerSpec } from "../workers/options.ts";
import type { ProgressSink } from "./progress.ts";
import { baseMessageLimit, type ResolvedPipelineOptions } from "./options.ts";
import type { BenchmarkResult, HeldOut, UnavailableRuntime } from "./stages.ts";
import { artifactPath, writeAtomic } from "./run-dir.ts";
import type { RemoteHosts } from "./remote-hosts.ts";
import type { DistributedRecord } from "../report/distributed.ts";


export interface WorkerRun {
  result: TaskResult;
  pid: number;
  command: string[];
  versions: Record<string, string>;
}

/** Room over an eval set's bytes when a limit is sized by them: the envelope, msgpack's framing. */
const MESSAGE_MARGIN = 1.05;
const MESSAGE_ENVELOPE_BYTES = 2 ** 20;

export class RunSession {
  readonly sampler: MemorySampler;
  readonly gpuProbe: (GpuProbe & { devices?(): Array<{ index: number; name: string; totalBytes: number; usedBytes: number }>; info?(): { driverVersion?: string } }) | undefined;
  /** The run's supervisors by their broker's message limit (one unless a stage needed a wider one). */
  readonly #supervisors = new Map<number, Promise<Supervisor>>();
  training: TrainingRecord | null = null;
  /** Distributed train stages (their ranks' marks and tensor bytes), in the order they finished. */
  readonly distributed: DistributedRecord[] = [];
  readonly runtimes: RuntimeRecord[] = [];
  readonly unavailable: UnavailableRuntime[] = [];
  readonly checkpointLoads: CheckpointLoadRecord[] = [];
  readonly stages: StageReport[] = [];
  readonly results = new Map<string, unknown>();
  readonly benchmarks = new Map<string, BenchmarkResult>();
  heldout: HeldOut | null = null;
  /** The eval set's largest message by ONNX file (exec-benchmark.ts evalSetMessageLimit); null where the graph could not be followed. */
  readonly evalSetBytes = new Map<string, number | null>();
  readonly #evalTensors = new Map<Tensor["data"], Tensor>();
  /** Extra lines for the terminal after the table (python stage output, notes); report.json's notes. */
  readonly notes: string[] = [];
  /**
   * The run's scratch directory (runs/<runId>/.tmp): every worker's TMPDIR, so that what
   * torch, ONNX Runtime or Python's tempfile leave behind stays inside the run.
   */
  tmpDir: string | undefined;
  /** The broker's limit and refusals, read when the session closes (undefined if no worker ran). */
  transport: TransportReport | undefined;
  /** One line on the refused messages, for the report's notes (set with `transport`). */
  transportNote: string | undefined;
  /** The run's reach to other hosts (`--rdzv-endpoint`): its CURVE broker and joined hosts; closed by {@link close}. */
  remote: RemoteHosts | undefined;

  constructor(
    readonly pipeline: string,
    readonly runId: string,
    readonly runDir: string,
    readonly options: ResolvedPipelineOptions,
    readonly progress: ProgressSink,
    gpu: RunSession["gpuProbe"],
    /** The run's shared-memory segments (large input tensors); closed by {@link close}. */
    readonly shm?: ShmRegistry,
  ) {
    this.gpuProbe = gpu;
    this.sampler = new MemorySampler(gpu ? { gpu } : {});
    this.sampler.track(process.pid, "orchestrator");
    this.sampler.start();
  }

  /**
   * The eval inputs as every benchmark worker receives them. Above the shared-memory
   * threshold they are written once into a segment that lives for the run and is mapped by
   * each worker in turn (referenced in place: no copy and no new segment per task, the
   * fastest path of bench:transport); below it, or without shared memory, they go as frames.
   */
  evalTensor(held: HeldOut): Tensor {
    // A trained model's held-out set in another dtype (tiny-gpt's int64 windows) goes as it is
    // where no export stage made it the multi-input form: python-torch benchmarked from train.
    return this.#placed(held.raw ?? { dtype: "float32", shape: held.shape, data: held.inputs });
  }

  /** An ONNX model's eval set in the multi-input form: `input:<name>` → tensor, each placed like {@link evalTensor}. */
  evalTensors(held: HeldOut): Record<string, Tensor> {
    if (!held.model) return { inputs: this.evalTensor(held) };
    return Object.fromEntries(held.model.inputs.map((i) => [`input:${i.spec.name}`, this.#placed(i.tensor)]));
  }

  #placed(t: Tensor): Tensor {
    const known = this.#evalTensors.get(t.data);
    if (known) return known;
    let tensor = t;
    if (this.shm && t.data.byteLength >= this.shm.thresholdBytes) {
      try {
        const placed = this.shm.allocateTensor(t.dtype, t.shape).tensor;
        new Uint8Array(placed.data.buffer, placed.data.byteOffset, placed.data.byteLength).set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        tensor = placed;
      } catch (err) {
        // No addon mapping: the per-task segment path (a pwrite copy each task) still applies.
        this.notes.push(`shared memory: eval set not placed in a run-long segment (${(err as Error).message})`);
      }
    }
    this.#evalTensors.set(t.data, tensor);
    return tensor;
  }

  artifact(name: string): string {
    return artifactPath(this.runDir, name);
  }

  writeArtifact(name: string, data: string | Uint8Array): Promise<string> {
    return writeAtomic(this.artifact(name), data);
  }

  /**
   * The supervisor of the run's broker; with `limit` above the run's message limit, one whose
   * broker takes messages of that size (bound at first use, kept for the stages that need it,
   * closed with the session): a limit widened for one benchmark's eval set stays off the
   * broker every other worker talks to.
   */
  supervisor(limit = baseMessageLimit(this.options.maxMessageBytes)): Promise<Supervisor> {
    // A wide broker serves wider needs only: a task within the run's limit never gets one.
    const base = baseMessageLimit(this.options.maxMessageBytes);
    const fits = limit <= base ? (this.#supervisors.has(limit) ? limit : undefined) : [...this.#supervisors.keys()].filter((l) => l >= limit).sort((a, b) => a - b)[0];
    if (fits !== undefined) return this.#supervisors.get(fits)!;
    const sup = Supervisor.start({
      spawn: { heartbeatTimeoutMs: 60_000 },
      maxMessageBytes: limit,
      // Bounded: the first refusals of each reason in full, then one line per power of ten.
      log: (line) => this.progress.log(`memlane: ${line}`),
      ...(this.shm ? { shm: this.shm } : {}),
    });
    this.#supervisors.set(limit, sup);
    return sup;
  }

  /**
   * The message limit for a task whose largest message (an eval set's outputs or inputs) takes
   * `bytes`: the run's limit when they fit in it or when the pipeline fixed it (the task then
   * fails naming the option), else `bytes` with room, said once in the notes under `what`.
   */
  messageLimitFor(bytes: number | null, what: string): number {
    const base = baseMessageLimit(this.options.maxMessageBytes);
    if (this.options.maxMessageBytes !== "auto" || bytes === null || bytes + MESSAGE_ENVELOPE_BYTES <= base) return base;
    const limit = Math.ceil((bytes * MESSAGE_MARGIN + MESSAGE_ENVELOPE_BYTES) / 2 ** 20) * 2 ** 20;
    const note = `${what}: message limit raised to ${limit / 2 ** 20} MiB for its eval set (${(bytes / 2 ** 20).toFixed(1)} MiB in one message; the run's limit is ${base / 2 ** 20} MiB)`;
    if (!this.notes.includes(note)) this.notes.push(note);
    return limit;
  }

  /**
   * Starts a fresh worker, runs one task on it, stops it. Every process of the worker (a
   * retry's fresh one too) is sampled from its spawn, before its hello, until it exits;
   * `onWorker` learns the handle once the hello has come.
   */
  async runTask(
    spec: WorkerSpec & { label?: string },
    task: string,
    args: Record<string, unknown>,
    opts: TaskRunOptions & { onWorker?: (w: WorkerHandle) => void; messageLimit?: number } = {},
  ): Promise<WorkerRun> {
    const { onWorker, messageLimit, ...runOpts } = opts;
    const sup = await this.supervisor(messageLimit);
    if (runOpts.signal?.aborted) throw runOpts.signal.reason;
    const { label, ...rest } = spec;
    const workerSpec: WorkerSpec = this.tmpDir ? { ...rest, env: { ...rest.env, TMPDIR: this.tmpDir } } : rest;
    const w = await sup.spawn(workerSpec, { onProcess: (p) => this.trackProcess(p.pid, label ?? spec.name, p.exited) });
    const pid = w.pid!;
    onWorker?.(w);
    try {
      const result = await w.run(task, args, runOpts);
      return {
        result,
        pid,
        command: [spec.command, ...(spec.args ?? [])],
        versions: { ...w.hello.versions },
      };
    } finally {
      await w.stop().catch(() => {});
    }
  }

  /**
   * Samples a process (a worker, the python bridge) under `label` from now until `exited`
   * resolves; its samples stay for the report.
   */
  trackProcess(pid: number, label: string, exited: Promise<unknown>): void {
    this.sampler.track(pid, label);
    void exited.then(() => this.sampler.untrack(pid));
  }

  gpuReport(): GpuReport {
    const st = this.sampler.gpuStatus();
    if (!st.ok || !this.gpuProbe?.devices) return { status: "unavailable", reason: st.reason ?? "no GPU probe", devices: [] };
    const driver = this.gpuProbe.info?.().driverVersion ?? null;
    return {
      status: "available",
      reason: null,
      devices: this.gpuProbe.devices().map((d) => ({
        index: d.index,
        name: d.name,
        totalMiB: Math.round((d.totalBytes / 2 ** 20) * 100) / 100,
        usedMiB: Math.round((d.usedBytes / 2 ** 20) * 100) / 100,
        driver,
      })),
    };
  }

  /** Stops every worker still running and the sampler. Safe to call twice. */
  async close(): Promise<void> {
    const sups = [...this.#supervisors.values()];
    this.#supervisors.clear();
    try {
      const supervisors = (await Promise.all(sups.map((p) => p.catch(() => undefined)))).filter((x) => x !== undefined);
      // Every broker closes even when one fails to; the first failure is thrown after the record.
      const closed = await Promise.allSettled(supervisors.map((x) => x.close()));
      if (supervisors.length > 0) {
        // One record for the run: the widest limit any broker had, every broker's refusals.
        const refused = mergeRefusals(supervisors.map((x) => x.broker.refused()));
        this.transport = { maxMessageBytes: Math.max(...supervisors.map((x) => x.broker.maxMessageBytes)), refused: { total: refused.total, byReason: { ...refused.byReason } } };
        this.transportNote = describeRefusals(refused);
      }
      const remote = this.remote;
      this.remote = undefined;
      if (remote) {
        const refused = await remote.close();
        const note = describeRefusals(refused);
        if (note) this.notes.push(`remote broker (${remote.endpoint}): ${note}`);
      }
      const failed = closed.find((c) => c.status === "rejected");
      if (failed) throw failed.reason;
    } finally {
      this.shm?.close(); // every segment of the run, also those of a worker that died mid-task
      await this.sampler.stop(); // also when closing a broker threw
    }
  }
}
