/** Pipeline options: the public type, frozen defaults and the one place they are checked. */
import { DEFAULT_MAX_MESSAGE_BYTES } from "../transport/protocol.ts";

/** Options of `pipeline(name, opts)`; every field has a default (PIPELINE_DEFAULTS). */
export interface PipelineOptions {
  /** Stages running at once (default 2). */
  concurrency?: number;
  /** Batch sizes every benchmark measures unless it says otherwise (default [1, 64]). */
  batchSizes?: number[];
  /** Timed calls per batch size (default 50). */
  iterations?: number;
  /** Untimed calls before timing (default 5). */
  warmup?: number;
  /** CPU threads of each runtime and of training (default 1: runtimes compared on equal terms, and no OpenMP spinning on a shared machine). */
  threads?: number;
  /**
   * Device for training and every runtime that has one (torch, ORT, memlane-rt; node-ort is
   * CPU only). Default "auto": CUDA where the worker finds a GPU (torch sees one, memlane-rt
   * a driver and a device), else the CPU; each runtime's report row says which it used.
   */
  device?: "cpu" | "cuda" | "auto";
  /**
   * The largest message between the orchestrator and a worker, in bytes: each frame and each
   * whole message. "auto" (the default): 256 MiB (the protocol's DEFAULT_MAX_MESSAGE_BYTES), and
   * a benchmark whose eval set needs more (its outputs or inputs as the graph gives them: a
   * decoder LM's logits over 256 samples) gets a broker of its own with that limit. A number
   * fixes the limit for every stage: a task over it fails naming this option.
   * docs/protocol.md, "Message size".
   */
  maxMessageBytes?: number | "auto";
}

export type ResolvedPipelineOptions = Readonly<Required<PipelineOptions>>;

export const PIPELINE_DEFAULTS: ResolvedPipelineOptions = Object.freeze({
  concurrency: 2,
  batchSizes: Object.freeze([1, 64]) as unknown as number[],
  iterations: 50,
  warmup: 5,
  threads: 1,
  device: "auto",
  maxMessageBytes: "auto",
});

/** A bad option: names it, what was expected and what was received. */
export class OptionError extends Error {
  override readonly name = "OptionError";
  constructor(
    readonly option: string,
    readonly expected: string,
    readonly received: unknown,
  ) {
    super(`${option}: expected ${expected}, received ${describe(received)}`);
  }
}

export function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(describe).join(", ")}]`;
  if (v === null || typeof v !== "object") return String(v);
  try {
    return JSON.stringify(v);
  } catch {
    return Object.prototype.toString.call(v);
  }
}

export function checkInt(option: string, v: unknown, min: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min)
    throw new OptionError(option, `an integer >= ${min}`, v);
  return v;
}

export function checkIntList(option: string, v: unknown, min: number): number[] {
  if (!Array.isArray(v) || v.length === 0 || v.some((x) => typeof x !== "number" || !Number.isInteger(x) || x < min))
    throw new OptionError(option, `a non-empty list of integers >= ${min}`, v);
  return [...(v as number[])];
}

export function checkOneOf<T extends string>(option: string, v: unknown, allowed: readonly T[]): T {
  if (typeof v !== "string" || !allowed.includes(v as T))
    throw new OptionError(option, `one of ${allowed.map((a) => `"${a}"`).join(", ")}`, v);
  return v as T;
}

function checkMessageLimit(v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1024) throw new OptionError("maxMessageBytes", '"auto" or an integer number of bytes >= 1024', v);
  return v;
}

const KNOWN = Object.keys(PIPELINE_DEFAULTS);

export function resolvePipelineOptions(opts: PipelineOptions = {}): ResolvedPipelineOptions {
  if (opts === null || typeof opts !== "object") throw new OptionError("pipeline options", "an object", opts);
  for (const k of Object.keys(opts))
    if (!KNOWN.includes(k)) throw new OptionError(`pipeline options.${k}`, `one of ${KNOWN.join(", ")}`, k);
  const o = { ...PIPELINE_DEFAULTS, ...opts };
  return Object.freeze({
    concurrency: checkInt("concurrency", o.concurrency, 1),
    batchSizes: Object.freeze(checkIntList("batchSizes", o.batchSizes, 1)) as number[],
    iterations: checkInt("iterations", o.iterations, 1),
    warmup: checkInt("warmup", o.warmup, 0),
    threads: checkInt("threads", o.threads, 1),
    device: checkOneOf("device", o.device, ["cpu", "cuda", "auto"] as const),
    maxMessageBytes: o.maxMessageBytes === "auto" ? "auto" : checkMessageLimit(o.maxMessageBytes),
  });
}

/** The limit every stage starts from: the fixed one, or the protocol's default under "auto". */
export function baseMessageLimit(opt: ResolvedPipelineOptions["maxMessageBytes"]): number {
  return opt === "auto" ? DEFAULT_MAX_MESSAGE_BYTES : opt;
}
