/**
 * Shape profiles for a multi-profile plan (docs/plan-format.md, "Profiles"), from the
 * options a user gives: `--profile SHAPES` once per profile (each in `--shape`'s
 * `name=NxDIM,...` form, like a trtexec `--shapes`), or several `--seq` values (one profile
 * each, every symbolic non-batch dim at that value, `--shape` fixing the others).
 * Each profile comes out as the compiler's `inputShapes`: full model shapes, -1 at the batch.
 */
import type { OnnxIo } from "./onnx-io.ts";
import { InputSpecError, type ShapeOverrides, resolveModelIo } from "./shapes.ts";

export interface ProfileRequest {
  /** `--shape`: dims every profile shares (not with `profiles`). */
  shapes?: ShapeOverrides;
  /** `--profile`, one entry a profile. */
  profiles?: ShapeOverrides[];
  /** `--seq`: one profile per value (a single value with `profiles`). */
  seqs?: number[];
}

/** The inputShapes of each profile, in the order given; empty when nothing was asked for. */
export function profileShapes(io: OnnxIo, req: ProfileRequest): Record<string, number[]>[] {
  const seqs = req.seqs ?? [];
  const profiles = req.profiles ?? [];
  if (profiles.length > 0 && req.shapes) throw new InputSpecError("--shape: not with --profile (give each profile's shapes in its --profile)", "--shape");
  if (profiles.length > 0 && seqs.length > 1)
    throw new InputSpecError(`--seq: one value with --profile (it fills the dims a --profile leaves out), received ${seqs.join(",")}`, "--seq");
  if (new Set(seqs).size !== seqs.length) throw new InputSpecError(`--seq: each value once, received ${seqs.join(",")}`, "--seq");
  const one = (shapes: ShapeOverrides | undefined, seq: number | undefined, option: string): Record<string, number[]> => {
    try {
      const { inputs } = resolveModelIo(io, { ...(shapes ? { shapes } : {}), ...(seq !== undefined ? { seq } : {}) });
      return Object.fromEntries(inputs.map((i) => [i.name, i.shape]));
    } catch (e) {
      // resolveModelIo names --shape; say which profile it was.
      if (e instanceof InputSpecError && option !== "--shape") throw new InputSpecError(`${option}: ${e.message.replace(/^--shape: /, "")}`, option);
      throw e;
    }
  };
  if (profiles.length > 0) return profiles.map((p, i) => one(p, seqs[0], `--profile #${i + 1}`));
  if (seqs.length > 1) return seqs.map((s) => one(req.shapes, s, `--seq ${s}`));
  if (req.shapes || seqs.length === 1) return [one(req.shapes, seqs[0], "--shape")];
  return [];
}
