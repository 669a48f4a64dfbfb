/**
 * Several compiled shape profiles of one model -> one plan whose weights are stored once
 * (docs/plan-format.md, "Profiles"). Each profile was compiled on its own, so each has its
 * own blob; a weight whose bytes another profile already stored points at those bytes instead.
 * Matching by content, not by name, also shares folded constants that came out equal, and keeps
 * apart the ones that depend on the profile's shapes (a causal mask of seq x seq, positions).
 */
import { createHash } from "node:crypto";
import type { Built } from "./build.ts";
import { PLAN_ALIGNMENT, type PlanHeader, alignUp } from "./plan-format.ts";

/** What the writer serialises: every profile's header and the one shared blob. */
export interface BuiltPlan {
  profiles: PlanHeader[];
  /** Weights in blob order with their blob offsets. */
  weights: { offset: number; data: Uint8Array }[];
  blobBytes: number;
}

export function mergeProfiles(built: readonly Built[]): BuiltPlan {
  const stored = new Map<string, number>(); // content key -> blob offset
  const weights: BuiltPlan["weights"] = [];
  let blob = 0;
  const profiles = built.map((b) => {
    const byOffset = new Map(b.weights.map((w) => [w.offset, w.data]));
    const header: PlanHeader = { ...b.header, tensors: b.header.tensors.map((t) => ({ ...t, shape: [...t.shape] })) };
    for (const t of header.tensors) {
      if (t.kind !== "weight") continue;
      const data = byOffset.get(t.offset)!;
      // dtype and shape are part of the key: equal bytes read as another type are another weight.
      const key = `${t.dtype}|${t.shape.join("x")}|${createHash("sha256").update(data).digest("hex")}`;
      let at = stored.get(key);
      if (at === undefined) {
        at = blob;
        stored.set(key, at);
        weights.push({ offset: at, data });
        blob = alignUp(blob + data.byteLength, PLAN_ALIGNMENT);
      }
      t.offset = at;
    }
    return header;
  });
  return { profiles, weights, blobBytes: blob };
}

/** Distinct weight bytes of a plan's profiles (a weight shared by several counts once). */
export function sharedWeightBytes(profiles: readonly PlanHeader[]): number {
  const seen = new Map<number, number>();
  for (const h of profiles) for (const t of h.tensors) if (t.kind === "weight") seen.set(t.offset, Math.max(seen.get(t.offset) ?? 0, t.bytes));
  return [...seen.values()].reduce((a, b) => a + b, 0);
}
