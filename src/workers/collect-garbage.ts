/**
 * Gives the orchestrator's garbage back to the kernel before node-ort's phases. node-ort runs on
 * a worker_thread of the orchestrator, so its phase figures are the orchestrator's process:
 * without this they carried whatever memlane itself had left behind before the stage began
 * (the scheduler's estimate and the native stage's compile decode the ONNX file; efficientnet_b0
 * left ~100 MiB in malloc's heap), an amount set by when V8 last collected and where glibc put
 * the blocks, not by onnxruntime-node.
 *
 * Three steps: a full V8 collection frees the dead ArrayBuffers' backing stores; V8's
 * low-memory notification (the addon's v8LowMemory) also shrinks the young generation, whose
 * semi-spaces stay resident at up to 32 MiB once memlane's own work grew them (a full collection
 * leaves them: the same tiny-gpt pipeline run twice read node-ort's import at 151.2 and 130.0
 * MiB, the difference all anonymous memory outside malloc's heap);
 * malloc_trim (the addon's mallocTrim) returns the free pages between live blocks of malloc's
 * heap, which free() alone never does. Measured in one process with 160 MiB of dropped 64 KiB
 * Buffers: RSS unchanged after the collection alone, down by the 160 MiB after all of them.
 *
 * It blocks the orchestrator's event loop while it runs (tens of milliseconds for a few hundred
 * MiB of heap), once per node-ort stage; a benchmark stage runs alone (the scheduler's rule), so
 * no other stage's timing is in flight then. `--expose-gc` set at run time is V8's flag, used
 * only to reach its gc function; nothing else depends on it.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { loadAddon } from "../memory/gpu-addon.ts";

let gc: (() => void) | undefined;

/**
 * Runs a full, synchronous garbage collection, shrinks V8's heap, then trims malloc. Returns whether the trim ran
 * (false without the addon, or off glibc): the collection alone still frees what sits at the
 * heap's top.
 */
export function collectGarbage(): boolean {
  if (!gc) {
    // A context created after the flag is set gets `gc` (no --expose-gc at startup needed).
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  // Twice: V8 frees dead ArrayBuffers' backing stores on a background sweeper after a
  // collection, and the next collection first completes that sweep. With one, the trim below
  // found the 160 MiB still allocated in one run of three.
  gc();
  gc();
  let addon: ReturnType<typeof loadAddon>;
  try {
    addon = loadAddon();
  } catch {
    return false;  // no addon built: node-ort still runs, its figures then carry the garbage
  }
  // After the collections: it collects again itself, and shrinks what they left grown.
  if (typeof addon.v8LowMemory === "function") addon.v8LowMemory();
  if (typeof addon.mallocTrim !== "function") return false;
  addon.mallocTrim();
  return true;
}
