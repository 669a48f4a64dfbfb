/**
 * What memlane-rt's model-load leaves resident, measured by a probe: a fresh memlane-rt worker
 * runs its `load` task on the compiled plan and the model-load phase's readings give the RSS
 * growth; the task's result gives the plan weight bytes the CPU backend gave back
 * (docs/memory.md, "memlane-rt's load").
 *
 * Why measured, not derived from the graph: the backend repacks a weight only where the kernel
 * it picks at prepare wants its own layout (Winograd's U, the pointwise panels, the blocked
 * depthwise and grouped weights, the packed LSTM), and which kernel it picks depends on the
 * shape, the CPU's features and the measured rules in cpu/conv.cc; a TypeScript copy of those
 * rules would drift from them. The probe is the backend deciding for itself, in about 0.1 s
 * plus a worker start. The same load gives the same figure (resnet18: +16.78 MiB at max batch
 * 1, 8 and 64: the arena is reserved, not touched, at load).
 */
import { inFreshWorker } from "../workers/fresh-worker.ts";
import type { PhaseMark } from "../transport/protocol.ts";
import { workerSpecs } from "../workers/specs.ts";

const MIB = 2 ** 20;

export interface NativeLoadProbe {
  /** RSS growth over model-load, MiB: the backend's repacked copies and its kernels' state. */
  loadMiB: number;
  /** Plan weight bytes the backend gave back after repacking, MiB: not resident once inference pages the rest in. */
  releasedMiB: number;
  /**
   * The arena per sample of the last ops, which the CPU backend runs over the whole batch where
   * it splits a batch into chunks (cpu/batch_tail.h), MiB; 0: no such ops.
   */
  batchTailPerSampleMiB: number;
  /**
   * The most a kernel's workspace grows a sample, MiB (an LSTM's input projections, S x 4H
   * floats a direction): the probe loads at maxBatch 1, a run's batch touches this much more
   * for every sample it runs at once.
   */
  workspacePerSampleMiB: number;
}

/** The worker's answer, checked: a bogus figure has slope ±1 in every native estimate. */
export function checkedNativeLoad(marks: readonly PhaseMark[], value: unknown): NativeLoadProbe {
  const bad = (why: string): never => {
    throw new Error(`native load probe: ${why}`);
  };
  const mark = (m: "start" | "end") => marks.find((x) => x.name === "model-load" && x.mark === m)?.memory;
  const s = mark("start");
  const e = mark("end");
  if (!s || !e) bad("the worker sent no model-load start and end marks");
  const rss = [s!.rssKiB, e!.rssKiB];
  if (rss.some((x) => typeof x !== "number" || !Number.isFinite(x) || x <= 0)) bad(`model-load RSS readings ${JSON.stringify(rss)} are not positive numbers`);
  const bytes = (field: string): number => {
    const v = (value as Record<string, unknown> | null)?.[field];
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) bad(`the load result's ${field} is ${JSON.stringify(v)}, not a number >= 0`);
    return v as number;
  };
  return {
    loadMiB: Math.max(0, (e!.rssKiB - s!.rssKiB) / 1024),
    releasedMiB: bytes("weightsBytesReleased") / MIB,
    batchTailPerSampleMiB: bytes("batchTailBytesPerSample") / MIB,
    workspacePerSampleMiB: bytes("workspaceBytesPerSample") / MIB,
  };
}

/** Loads `planPath` in a fresh memlane-rt worker (CPU, `threads`) and reads what the load left. */
export function probeNativeLoad(planPath: string, opts: { threads?: number } = {}): Promise<NativeLoadProbe> {
  return inFreshWorker(workerSpecs.memlaneRt({ name: "estimate-native-load" }), async (w) => {
    const marks: PhaseMark[] = [];
    const r = await w.run("load", { model: planPath, maxBatch: 1, threads: opts.threads ?? 1, device: "cpu" }, { timeoutMs: 120_000, onPhase: (m) => marks.push(m) });
    return checkedNativeLoad(marks, r.value);
  });
}
