/**
 * One task in a worker of its own: a supervisor and a worker started for it, both gone when it
 * ends, whatever happens. What the estimate's probes use (ort-load.ts, native-load.ts,
 * torch-terms.ts): a figure read in a fresh process is not an earlier task's.
 */
import { Supervisor } from "./supervisor.ts";
import type { WorkerHandle } from "./handle.ts";
import type { WorkerSpec } from "./options.ts";

export async function inFreshWorker<T>(spec: WorkerSpec, fn: (w: WorkerHandle) => Promise<T>): Promise<T> {
  const sup = await Supervisor.start();
  try {
    const w = await sup.spawn(spec);
    try {
      return await fn(w);
    } finally {
      await w.stop();
    }
  } finally {
    await sup.close();
  }
}
