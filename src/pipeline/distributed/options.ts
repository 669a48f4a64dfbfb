/**
 * The `distributed` option of a train stage, checked once at the builder (errors name the
 * stage and the field) and resolved with its defaults.
 */
import { DEFAULT_TRAIN_BATCH_SIZE, DIST_BACKENDS, DIST_STRATEGIES, type DistributedOptions } from "../stages.ts";
import { checkInt, checkOneOf, OptionError } from "../options.ts";

export interface ResolvedDistributed {
  nproc: number;
  strategy: DistributedOptions["strategy"];
  backend: NonNullable<DistributedOptions["backend"]>;
  allowCpuFallback: boolean;
  nnodes: number;
  /** undefined: 127.0.0.1 and a free port, chosen when the stage starts. */
  rdzvEndpoint: string | undefined;
}

const HOST_PORT = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;
/** A sane bound for one host's ranks: each is a full Python process with torch loaded. */
const MAX_NPROC = 64;

export function resolveDistributed(stage: string, d: unknown): ResolvedDistributed {
  const where = `stage "${stage}": distributed`;
  if (typeof d !== "object" || d === null || Array.isArray(d))
    throw new OptionError(where, '{ nproc, strategy: "ddp" | "fsdp", backend?: "gloo" | "nccl" }', d);
  const o = d as Partial<DistributedOptions>;
  checkInt(`${where}.nproc`, o.nproc, 1);
  if ((o.nproc as number) > MAX_NPROC) throw new OptionError(`${where}.nproc`, `at most ${MAX_NPROC}`, o.nproc);
  checkOneOf(`${where}.strategy`, o.strategy, DIST_STRATEGIES);
  if (o.backend !== undefined) checkOneOf(`${where}.backend`, o.backend, DIST_BACKENDS);
  if (o.allowCpuFallback !== undefined && typeof o.allowCpuFallback !== "boolean")
    throw new OptionError(`${where}.allowCpuFallback`, "a boolean", o.allowCpuFallback);
  if (o.nnodes !== undefined) checkInt(`${where}.nnodes`, o.nnodes, 1);
  const nnodes = o.nnodes ?? 1;
  if (o.rdzvEndpoint !== undefined) {
    const m = typeof o.rdzvEndpoint === "string" ? HOST_PORT.exec(o.rdzvEndpoint) : null;
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new OptionError(`${where}.rdzvEndpoint`, "host:port", o.rdzvEndpoint);
  }
  // FSDP saves sharded (dcp) checkpoints into the run directory, which exists on this host only:
  // on several hosts each would write its shards to its own disk and rank 0 would publish an
  // incomplete checkpoint.
  if (o.strategy === "fsdp" && nnodes > 1)
    throw new OptionError(`${where}.strategy`, '"ddp" with nnodes > 1 (fsdp saves sharded checkpoints into this host\'s run directory, which the other hosts do not share)', o.strategy);
  // nnodes > 1 without an endpoint here takes `memlane run --rdzv-endpoint`'s (checked when the stage starts: multi-host.ts).
  return {
    nproc: o.nproc as number,
    strategy: o.strategy as ResolvedDistributed["strategy"],
    backend: o.backend ?? "gloo",
    allowCpuFallback: o.allowCpuFallback ?? false,
    nnodes,
    rdzvEndpoint: o.rdzvEndpoint,
  };
}


/**
 * Each rank trains on batchSize / worldSize samples a step so that a step sees the
 * single-process batch in total: refuse a batch the ranks cannot share evenly.
 */
export function checkBatchDivides(stage: string, d: ResolvedDistributed, batchSize: number | undefined): void {
  const world = d.nproc * d.nnodes;
  const batch = batchSize ?? DEFAULT_TRAIN_BATCH_SIZE;
  if (batch % world !== 0)
    throw new OptionError(`stage "${stage}": batchSize`, `a multiple of the ${world} ranks (nproc ${d.nproc} x nnodes ${d.nnodes}): each rank trains on batchSize / ranks samples a step`, batchSize ?? `${batch} (the default)`);
}
