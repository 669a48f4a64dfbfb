/** Typed-array helpers for eval tensors of any protocol dtype: allocation, float16 bits, axis moves, numbers. */
import type { TensorData } from "../../transport/codec.ts";
import type { DType } from "../../transport/protocol.ts";

export function allocate(dtype: DType, n: number): TensorData {
  switch (dtype) {
    case "float32": return new Float32Array(n);
    case "float16": return new Uint16Array(n);
    case "int64": return new BigInt64Array(n);
    case "int32": return new Int32Array(n);
    case "bool":
    case "uint8": return new Uint8Array(n);
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half bits of `x` (round to nearest even; overflow to infinity). */
export function toHalfBits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    if ((mant >>> (shift - 1)) & 1 && (mant & ((1 << (shift - 1)) - 1) || h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  if (mant & 0x1000 && (mant & 0xfff || h & 1)) h++;
  return sign | h;
}

export function fromHalfBits(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Element `i` as a number (float16 decoded, int64 converted). */
export function numberAt(dtype: DType, data: TensorData, i: number): number {
  const v = data[i]!;
  if (dtype === "float16") return fromHalfBits(v as number);
  return typeof v === "bigint" ? Number(v) : v;
}

/** A C-order array of `shape` with axis `axis` moved to the front. */
export function moveAxisToFront(dtype: DType, data: TensorData, shape: readonly number[], axis: number): { data: TensorData; shape: number[] } {
  if (axis <= 0) return { data, shape: [...shape] };
  const outer = shape.slice(0, axis).reduce((a, b) => a * b, 1);
  const n = shape[axis]!;
  const inner = shape.slice(axis + 1).reduce((a, b) => a * b, 1);
  const out = allocate(dtype, data.length);
  for (let o = 0; o < outer; o++)
    for (let b = 0; b < n; b++) {
      const src = (o * n + b) * inner;
      (out as Uint8Array).set((data as Uint8Array).subarray(src, src + inner), (b * outer + o) * inner);
    }
  return { data: out, shape: [n, ...shape.slice(0, axis), ...shape.slice(axis + 1)] };
}
