/**
 * ONNX Runtime in Node: inference on a worker_thread of the orchestrator, measured like the
 * Python worker's infer.ort. The thread shares the orchestrator's process, so its memory
 * figures are the orchestrator's pid (the report says so: process kind "node").
 */
import { Worker } from "node:worker_threads";
import type { MemoryReading, SmapsSummary } from "../transport/protocol.ts";
import { parseSmaps } from "../memory/smaps.ts";
import { addonPathInUse, loadAddon } from "../memory/gpu-addon.ts";
import { collectGarbage } from "./collect-garbage.ts";
import type { LatencyTable } from "../report/schema.ts";
import type { ModelIo } from "../pipeline/inputs/shapes.ts";
import type { OutputTensor } from "../pipeline/stages.ts";
import type { TensorData } from "../transport/codec.ts";
import type { DType } from "../transport/protocol.ts";

export interface NodeOrtTask {
  model: string;
  /** Eval inputs, [n, ...sample shape] float32. Copied to the thread. */
  inputs: Float32Array;
  shape: number[];
  batchSizes: number[];
  iterations: number;
  warmup: number;
  threads: number;
  /**
   * The multi-input form (docs/worker-tasks.md, "Several inputs and outputs"): every graph
   * input's spec and its eval tensor (batch first, `feeds`); then `inputs`/`shape` are unused
   * and the result carries every output in `outputSet`.
   */
  io?: ModelIo;
  feeds?: Array<{ name: string; dtype: DType; shape: number[]; data: TensorData }>;
  /** Per-op profile after the timed calls (docs/profiling.md): ORT's profiler at this batch, this many calls. */
  profile?: { batch: number; iterations: number };
  ort?: {
    cpuMemArena?: boolean;
    memPattern?: boolean;
    graphOptimizationLevel?: "disable" | "basic" | "extended" | "all";
  };
}

export interface NodeOrtPhase {
  name: string;
  mark: "start" | "end";
  tMs: number;
  memory: MemoryReading;
  /** The orchestrator's /proc/self/smaps summary, read by the thread at the mark (end marks and the first start). */
  smaps?: SmapsSummary;
}

export interface NodeOrtResult {
  pid: number;
  device: string;
  versions: Record<string, string>;
  latencyMs: LatencyTable;
  throughputPerS: number;
  /** Outputs over the whole eval set, transferred (not copied) from the thread. */
  outputs: Float32Array;
  outputShape: number[];
  /** Every graph output, batch first (multi-input form only). */
  outputSet?: OutputTensor[];
  /** The per-op profile as the thread took it (task.profile only). */
  profile?: unknown;
}

const THREAD = new URL("./node-ort-thread.mjs", import.meta.url);

/**
 * The addon's path where it can read mallinfo2, for the thread's readings (it loads the addon
 * itself: an addon's functions do not cross threads); undefined without it, and node-ort's
 * malloc figures are then absent, as a process's that cannot read them.
 */
function mallocInfoAddon(): string | undefined {
  try {
    return typeof loadAddon().mallocInfo === "function" ? addonPathInUse() : undefined;
  } catch {
    return undefined;
  }
}

/** Runs one node-ort benchmark; `signal` terminates the thread. */
export function runNodeOrt(
  task: NodeOrtTask,
  opts: { onPhase?: (p: NodeOrtPhase) => void; signal?: AbortSignal } = {},
): Promise<NodeOrtResult> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return reject(opts.signal.reason ?? new Error("aborted"));
    // The orchestrator's own garbage is not onnxruntime-node's (collect-garbage.ts).
    collectGarbage();
    // execArgv: [] — the thread body is plain JavaScript; no loader flags needed in it.
    const worker = new Worker(THREAD, { workerData: { ...task, mallocInfoAddon: mallocInfoAddon() }, execArgv: [] });
    let settled = false;
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener("abort", onAbort);
      fn();
      void worker.terminate();
    };
    const onAbort = (): void => finish(() => reject(opts.signal?.reason ?? new Error("node-ort: aborted")));
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    worker.on("message", (m: { type: string } & Record<string, any>) => {
      if (m.type === "phase") {
        const { smapsText, ...mark } = m as unknown as NodeOrtPhase & { smapsText?: string };
        opts.onPhase?.(smapsText === undefined ? mark : { ...mark, smaps: parseSmaps(smapsText) });
      }
      else if (m.type === "result")
        finish(() => resolve({ pid: process.pid, ...(m.value as Omit<NodeOrtResult, "pid">) }));
      else if (m.type === "error")
        finish(() => reject(Object.assign(new Error(`node-ort: ${m.message}`), { stack: m.stack })));
    });
    worker.on("error", (err) => finish(() => reject(err)));
    worker.on("exit", (code) =>
      finish(() => reject(new Error(`node-ort: worker thread exited with code ${code} before its result`))),
    );
  });
}
