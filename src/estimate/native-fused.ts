/**
 * The arena bytes memlane-rt's CPU backend never writes: the tensors between a 1x1 conv and
 * the depthwise conv it runs fused with them (src/compiler/fused-conv-pair.ts finds the pairs;
 * the backend's rule, `pointwise_depthwise_pays` in native/runtime/src/cpu/
 * conv_depthwise_blocked.cc, is mirrored here: AVX-512, and an expanded map of at least
 * 128 Ki floats a sample). Those pages are never touched, so they are not resident: where no
 * other tensor shares their bytes (the expanded map is often the arena's largest tensor), the
 * estimate counting the whole arena was high. mobilenet_v2 at batches 1 and 8: steady RSS
 * +14.0 % before this, its 96-channel 112x112 expansion (4.6 MiB) never written.
 */
import { pointwiseDepthwisePairs } from "../compiler/fused-conv-pair.ts";
import type { PlanHeader } from "../compiler/plan-format.ts";
import { cpuFlags } from "./cpu-flags.ts";

/** conv_depthwise_blocked.cc kPwDwMinFloats. */
export const PW_DW_MIN_FLOATS = 128 * 1024;

/** Whether the backend fuses a pair whose depthwise input is [batch, C, H, W] on a CPU with these flags (pointwise_depthwise_pays). */
export function pairFused(dims: readonly number[], flags: ReadonlySet<string>, env: NodeJS.ProcessEnv = process.env): boolean {
  if (!flags.has("avx512f") || env.MEMLANE_CPU_NO_AVX512 || env.MEMLANE_DW_PER_CHANNEL || env.MEMLANE_NO_FUSION || env.MEMLANE_CONV_NO_PW_DW) return false;
  return env.MEMLANE_CONV_PW_DW !== undefined || dims[1]! * dims[2]! * dims[3]! >= PW_DW_MIN_FLOATS;
}

/** Arena bytes a sample that no tensor the backend writes covers (the plan's arena minus the union of the written tensors' ranges). */
export function nativeUnwrittenBytesPerSample(h: Pick<PlanHeader, "tensors" | "ops" | "outputs" | "arena">, flags: ReadonlySet<string> = cpuFlags()): number {
  const skipped = new Set<number>();
  for (const p of pointwiseDepthwisePairs(h.ops, h.outputs, (id) => h.tensors[id]?.shape))
    if (pairFused(p.dims, flags)) for (const t of p.between) skipped.add(t);
  if (skipped.size === 0) return 0;
  const ranges = h.tensors
    .map((t, id) => ({ t, id }))
    .filter(({ t, id }) => t.kind !== "weight" && !skipped.has(id) && t.bytes > 0)
    .map(({ t }) => [t.offset, t.offset + t.bytes] as const)
    .sort((a, b) => a[0] - b[0]);
  let covered = 0;
  let end = 0;
  for (const [a, b] of ranges) {
    if (b <= end) continue;
    covered += b - Math.max(a, end);
    end = b;
  }
  return Math.max(0, h.arena.bytesPerSample - covered);
}
