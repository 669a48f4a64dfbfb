/**
 * Spawns workers against one broker and keeps track of them so they can all be stopped.
 */
import { Broker } from "../transport/broker.ts";
import type { ShmRegistry } from "../transport/shm.ts";
import type { BrokerOptions } from "../transport/endpoint.ts";
import { WorkerHandle } from "./handle.ts";
import { Incarnation } from "./incarnation.ts";
import { checkSpec, resolveSpawnOptions, type ResolvedSpawnOptions, type SpawnOptions, type WorkerSpec } from "./options.ts";

/** Options of {@link Supervisor.start}: where to bind, and defaults for every spawn. */
export interface SupervisorOptions extends BrokerOptions {
  /** Defaults for {@link Supervisor.spawn}; each spawn may override them. */
  spawn?: SpawnOptions;
  /** Use this broker instead of binding one (it is not closed by {@link Supervisor.close}). */
  broker?: Broker;
  /**
   * Send input tensors of at least `shm.thresholdBytes` through shared memory (segments of
   * this registry, unlinked when the task ends and at the latest when the registry closes) to
   * workers whose hello lists the `shm` capability; others get frames. Without it every
   * tensor is a frame. The caller owns the registry (one per run) and closes it.
   */
  shm?: ShmRegistry;
}

/** Owns a broker and the workers spawned on it. */
export class Supervisor {
  private readonly handles = new Set<WorkerHandle>();
  private closing: Promise<void> | undefined;

  private constructor(
    /** The broker workers connect to. */
    readonly broker: Broker,
    private readonly ownsBroker: boolean,
    private readonly defaults: ResolvedSpawnOptions,
    /** The registry large input tensors go through, if any ({@link SupervisorOptions.shm}). */
    readonly shm: ShmRegistry | undefined,
  ) {}

  /** Bind a broker (loopback tcp by default) and return a supervisor for it. */
  static async start(options: SupervisorOptions = {}): Promise<Supervisor> {
    const { spawn, broker, shm, ...brokerOptions } = options;
    const defaults = resolveSpawnOptions(spawn ?? {});
    if (shm !== undefined && (typeof shm !== "object" || shm === null || typeof (shm as ShmRegistry).allocate !== "function"))
      throw new TypeError(`Supervisor option \`shm\`: expected a ShmRegistry, got ${JSON.stringify(shm)}`);
    const b = broker ?? (await Broker.bind(brokerOptions));
    return new Supervisor(b, broker === undefined, defaults, shm);
  }

  /** The endpoint workers are told to `--connect` to. */
  get endpoint(): string {
    return this.broker.endpoint;
  }

  /** Live handles (stopped ones are removed). */
  get workers(): ReadonlySet<WorkerHandle> {
    return this.handles;
  }

  /**
   * Launch `spec.command spec.args --connect <endpoint> --name <spec.name>` and wait for
   * its hello. Rejects with a WorkerError: TIMEOUT if no hello comes in time,
   * VERSION_MISMATCH (the worker is stopped), WORKER_DIED if it exits first.
   */
  async spawn(spec: WorkerSpec, options: SpawnOptions = {}): Promise<WorkerHandle> {
    if (this.closing) throw new Error(`supervisor is closed; cannot spawn worker "${spec.name}"`);
    checkSpec(spec);
    const o = resolveSpawnOptions(options, this.defaults);
    const launch = async (): Promise<Incarnation> => {
      const inc = new Incarnation(this.broker, spec, o, this.shm);
      try {
        await inc.ready;
      } catch (err) {
        await inc.proc.exited; // nothing of a failed spawn is left running
        throw err;
      }
      return inc;
    };
    const handle = new WorkerHandle(await launch(), launch, (h) => this.handles.delete(h));
    this.handles.add(handle);
    return handle;
  }

  /** Stop every worker by escalation, then close the broker (if this supervisor bound it). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([...this.handles].map((h) => h.stop()));
      if (this.ownsBroker) await this.broker.close();
    })();
    return this.closing;
  }
}
