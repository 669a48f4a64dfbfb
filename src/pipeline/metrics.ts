/** Numerics computed in one place for every runtime: accuracy and max abs diff. */
import type { TensorData } from "../transport/codec.ts";
import type { DType } from "../transport/protocol.ts";
import { numberAt } from "./inputs/tensor-data.ts";

/** Argmax per row of a [n, k] output. */
export function argmaxRows(outputs: Float32Array, n: number): Int32Array {
  const k = outputs.length / n;
  if (!Number.isInteger(k) || k < 1) throw new Error(`outputs: expected a multiple of ${n} values, received ${outputs.length}`);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    let best = 0;
    let bv = outputs[i * k]!;
    for (let j = 1; j < k; j++) {
      const v = outputs[i * k + j]!;
      if (v > bv) {
        bv = v;
        best = j;
      }
    }
    out[i] = best;
  }
  return out;
}

/** Fraction of rows whose argmax equals the label. */
export function accuracy(outputs: Float32Array, labels: BigInt64Array | Int32Array | number[]): number {
  const n = labels.length;
  if (n === 0) throw new Error("accuracy: no labels");
  const pred = argmaxRows(outputs, n);
  let ok = 0;
  for (let i = 0; i < n; i++) if (pred[i] === Number(labels[i])) ok++;
  return ok / n;
}

/** max |a - b| over every element; throws when the lengths differ. */
export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`maxAbsDiff: outputs differ in length (${a.length} vs ${b.length})`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (d > m || Number.isNaN(d)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

/** max |a - b| of two outputs of any dtype (float16 decoded, int64 as numbers); throws when their sizes differ. */
export function maxAbsDiffAny(
  a: { dtype: DType; data: TensorData },
  b: { dtype: DType; data: TensorData },
): number {
  if (a.data instanceof Float32Array && b.data instanceof Float32Array) return maxAbsDiff(a.data, b.data);
  if (a.data.length !== b.data.length) throw new Error(`maxAbsDiff: outputs differ in length (${a.data.length} vs ${b.data.length})`);
  let m = 0;
  for (let i = 0; i < a.data.length; i++) {
    const d = Math.abs(numberAt(a.dtype, a.data, i) - numberAt(b.dtype, b.data, i));
    if (Number.isNaN(d)) return Infinity;
    if (d > m) m = d;
  }
  return m;
}
