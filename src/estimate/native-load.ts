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
  /**
   * How far model-load's peak RSS rose above its end, MiB (VmHWM at the end mark less RSS): a
   * weight's original plan pages are read while its repacked copy is made, and given back only
   * once its last reader is built, so the load holds both for a while.
   */
  loadPeakAboveEndMiB: number;
  /** Plan weight bytes the backend gave back after repacking, MiB: not resident once inference pages the rest in. */
  releasedMiB: number;
  /**
   * The arena per sample of the last ops, which the CPU backend runs over the whole batch where
   * it splits a batch into chunks (cpu/batch_tail.h), MiB; 0: no such ops.
   */
  batchTailPerSampleMiB: number;
  /**
   * The largest kernel workspace for 2^i samples run at once (i = 0, 1 ... : batches 1, 2, 4 ...),
   * MiB, as the backend sizes it (the load is at maxBatch 1; these are its kernels' sizes for
   * other batches). The scratch a request touches besides the arena: an im2col conv's columns
   * (K x P floats a sample, up to the conv's chunk cap: 18 MiB a sample for a 32-channel 3x3
   * conv on a 128x128 map, on a CPU without AVX-512 where no gathering path takes it), an LSTM's
   * input projections (S x 4H floats a sample). workspaceAt reads it for any batch.
   */
  workspaceByBatchMiB: number[];
  /**
   * Of the plan's arena a sample, what no kernel writes, MiB: a fused kernel writes its last
   * op's output only, so the tensors inside it (a 1x1 conv's expansion before the depthwise conv
   * fused with it, a MatMul's product before its bias and Gelu) are never resident where no
   * other tensor shares their bytes. The backend's own figure (cpu/arena_unwritten.h), for the
   * kernels it built on this CPU: mobilenet_v2's 96-channel 112x112 expansion (4.6 MiB a
   * sample), Swin's MLP bias output (368 KiB a sample).
   */
  unwrittenPerSampleMiB: number;
  /**
   * The batch tail's own figures (cpu/batch_tail.h): of its arena a sample, what no kernel writes
   * (mobilenet_v2's last 1x1 conv writes its ReLU6's output, not the conv's, 245 KiB a sample),
   * MiB; and its kernels' workspace for 2^i samples, MiB (empty without a tail). Where a batch is
   * split the tail runs over all of it, in the workspace the chunks use.
   */
  batchTailUnwrittenPerSampleMiB: number;
  batchTailWorkspaceByBatchMiB: number[];
}

/**
 * The workspace a request of `samples` samples at once touches, MiB, from the probe's curve:
 * linear between the powers of two around it (a kernel's size is linear in the samples up to
 * its cap, then flat), the last point's growth beyond the curve. 0 without a curve.
 */
export function workspaceAt(curveMiB: readonly number[], samples: number): number {
  if (!curveMiB.length || samples < 1) return 0;
  const i = Math.min(Math.floor(Math.log2(samples)), curveMiB.length - 1);
  const lo = 2 ** i;
  const at = curveMiB[i]!;
  if (samples === lo) return at;
  const next = curveMiB[i + 1];
  // Past the curve: grow as its last doubling did.
  const slope = next !== undefined ? (next - at) / lo : i > 0 ? (at - curveMiB[i - 1]!) / (lo / 2) : 0;
  return at + slope * (samples - lo);
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
  const rss = [s!.rssKiB, e!.rssKiB, e!.hwmKiB];
  if (rss.some((x) => typeof x !== "number" || !Number.isFinite(x) || x <= 0)) bad(`model-load RSS readings and end HWM ${JSON.stringify(rss)} are not positive numbers`);
  const bytes = (field: string): number => {
    const v = (value as Record<string, unknown> | null)?.[field];
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) bad(`the load result's ${field} is ${JSON.stringify(v)}, not a number >= 0`);
    return v as number;
  };
  const curve = (field: string, mayBeEmpty = false): number[] => {
    const v = (value as Record<string, unknown> | null)?.[field];
    const ok = Array.isArray(v) && (mayBeEmpty || v.length > 0) && v.every((x, i) => typeof x === "number" && Number.isFinite(x) && x >= 0 && (i === 0 || x >= (v[i - 1] as number)));
    if (!ok) bad(`the load result's ${field} is ${JSON.stringify(v)}, not a non-decreasing list of numbers >= 0`);
    return (v as number[]).map((x) => x / MIB);
  };
  return {
    loadMiB: Math.max(0, (e!.rssKiB - s!.rssKiB) / 1024),
    loadPeakAboveEndMiB: Math.max(0, (e!.hwmKiB - e!.rssKiB) / 1024),
    releasedMiB: bytes("weightsBytesReleased") / MIB,
    batchTailPerSampleMiB: bytes("batchTailBytesPerSample") / MIB,
    workspaceByBatchMiB: curve("workspaceBytesByBatch"),
    unwrittenPerSampleMiB: bytes("arenaUnwrittenBytesPerSample") / MIB,
    batchTailUnwrittenPerSampleMiB: bytes("batchTailUnwrittenBytesPerSample") / MIB,
    batchTailWorkspaceByBatchMiB: curve("batchTailWorkspaceBytesByBatch", true),
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
