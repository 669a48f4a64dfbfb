/**
 * Gives the orchestrator's garbage back to the kernel before node-ort's phases. node-ort runs on
 * a worker_thread of the orchestrator, so its phase figures are the orchestrator's process:
 * without this they carried whatever memlane itself had left behind before the stage began
 * (the scheduler's estimate and the native stage's compile decode the ONNX file; efficientnet_b0
 * left ~100 MiB in malloc's heap), an amount set by when V8 last collected and where glibc put
 * the blocks, not by onnxruntime-node.
 *
 * Two steps, both needed: a full V8 collection frees the dead ArrayBuffers' backing stores, and
 * malloc_trim (the native addon's mallocTrim) returns the free pages between live blocks of
 * malloc's heap, which free() alone never does. Measured in one process with 160 MiB of dropped
 * 64 KiB Buffers: RSS unchanged after the collection alone, down by the 160 MiB after both.
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
 * Runs a full, synchronous garbage collection, then trims malloc. Returns whether the trim ran
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
  let trim: (() => boolean) | undefined;
  try {
    trim = loadAddon().mallocTrim;
  } catch {
    return false;  // no addon built: node-ort still runs, its figures then carry the garbage
  }
  if (typeof trim !== "function") return false;
  trim();
  return true;
}
