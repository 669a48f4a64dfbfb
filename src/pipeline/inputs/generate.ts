/**
 * Generated eval inputs that a model accepts as real ones, the same for every runtime
 * (deterministic in the seed):
 * - integer inputs reaching a Gather's indices: seeded ids in [0, vocabulary) (index-bounds.ts);
 * - names like `*mask*`: ones, in any dtype (bool: true); `*type_ids*`, `token_type*`, `segment*`: zeros;
 *   `position_ids`: 0..S-1 along the last axis;
 * - integer `bbox`/`boxes` inputs whose last axis is 4 (LayoutLM's, LiLT's): boxes (x0, y0, x1,
 *   y1) with x0 <= x1 and y0 <= y1, below the bound of the Gathers they reach (else 1000, the
 *   0-1000 grid those models are trained on), so that the width and height embeddings' ids
 *   (x1 - x0, y1 - y0) are in range too;
 * - other integer inputs: zeros; other bool inputs: true;
 * - floats (float32, float16): seeded uniform in [-1, 1); uint8: seeded 0..255.
 */
import type { Tensor, TensorData } from "../../transport/codec.ts";
import type { IndexBound } from "./index-bounds.ts";
import type { IoSpec } from "./shapes.ts";
import { allocate, toHalfBits } from "./tensor-data.ts";

/** Deterministic pseudo-random numbers in [-1, 1) (xorshift32), so that every runtime sees the same ones. */
export function generatedInputs(shape: number[], seed = 1): Float32Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = (x / 0xffffffff) * 2 - 1;
  }
  return out;
}

const MASK = /mask/i;
const ZEROS = /type_ids|token_type|segment/i;
const POSITIONS = /^position_ids$|^positions?$|position_id/i;
const BOXES = /bbox|boxes/i;
/** LayoutLM's coordinate grid: boxes normalized to 0..1000. */
const BOX_GRID = 1001;

/** The wire shape of an eval input: batch first with `nEval` rows; an input without batch as is. */
export function wireShape(spec: IoSpec, nEval: number): number[] {
  if (spec.batchAxis < 0) return [...spec.shape];
  return [nEval, ...spec.shape.filter((_, k) => k !== spec.batchAxis)];
}

export interface GeneratedInput {
  tensor: Tensor;
  /** What the values are, for the report ("ids in [0, 1000) (Gather ...)", "ones (mask)"...). */
  values: string;
}

export function generateInput(spec: IoSpec, nEval: number, seed: number, bound?: IndexBound): GeneratedInput {
  const shape = wireShape(spec, nEval);
  const n = shape.reduce((a, b) => a * b, 1);
  const data: TensorData = allocate(spec.dtype, n);
  const fill = (f: (i: number) => number): void => {
    if (data instanceof BigInt64Array) for (let i = 0; i < n; i++) data[i] = BigInt(f(i));
    else for (let i = 0; i < n; i++) data[i] = f(i);
  };
  const last = shape[shape.length - 1] ?? 1;
  const isInt = spec.dtype === "int64" || spec.dtype === "int32";
  let values: string;
  if (MASK.test(spec.name) && spec.dtype !== "uint8") {
    fill(() => (spec.dtype === "float16" ? 0x3c00 : 1)); // a float mask too: 1.0 keeps every position
    values = "ones (mask)";
  } else if (isInt && ZEROS.test(spec.name)) {
    values = "zeros (type ids)";
  } else if (isInt && POSITIONS.test(spec.name)) {
    const m = bound?.bound ?? Number.MAX_SAFE_INTEGER;
    fill((i) => (i % last) % m);
    values = `0..${Math.min(last, m) - 1} along the last axis (positions)`;
  } else if (isInt && BOXES.test(spec.name) && last === 4) {
    const m = bound?.bound ?? BOX_GRID;
    const r = generatedInputs([n], seed);
    const id = (i: number) => Math.min(m - 1, Math.floor(((r[i]! + 1) / 2) * m));
    // Coordinate k of a box: the smaller of its pair's two draws for x0/y0, the larger for x1/y1.
    fill((i) => {
      const k = i % 4;
      const a = id(i - k + (k % 2));
      const b = id(i - k + (k % 2) + 2);
      return k < 2 ? Math.min(a, b) : Math.max(a, b);
    });
    values = `boxes (x0, y0, x1, y1) in [0, ${m}), x0 <= x1, y0 <= y1${bound ? ` (indices of Gather "${bound.node}")` : ""}`;
  } else if (isInt && bound) {
    const r = generatedInputs([n], seed);
    fill((i) => Math.min(bound.bound - 1, Math.floor(((r[i]! + 1) / 2) * bound.bound)));
    values = `ids in [0, ${bound.bound}) (indices of Gather "${bound.node}")`;
  } else if (isInt) {
    values = "zeros (reaches no Gather)";
  } else if (spec.dtype === "bool") {
    fill(() => 1);
    values = "true";
  } else if (spec.dtype === "uint8") {
    const r = generatedInputs([n], seed);
    fill((i) => Math.floor(((r[i]! + 1) / 2) * 255));
    values = "uniform 0..255";
  } else {
    const r = generatedInputs([n], seed);
    if (data instanceof Float32Array) data.set(r);
    else fill((i) => toHalfBits(r[i]!));
    values = "uniform [-1, 1)";
  }
  return { tensor: { dtype: spec.dtype, shape, data }, values };
}
