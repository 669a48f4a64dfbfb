/** Elementwise arithmetic on constants (numpy broadcasting), used by constant folding. */
import type { ConstTensor, DType } from "./ir.ts";

export function broadcastDims(a: readonly number[], b: readonly number[]): number[] | undefined {
  const r = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < r; i++) {
    const da = a[a.length - r + i] ?? 1;
    const db = b[b.length - r + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) return undefined;
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Flat index into `dims` (right-aligned, broadcast) for each flat index of `out`. */
export function broadcastIndex(dims: readonly number[], out: readonly number[]): Int32Array {
  const n = out.reduce((x, y) => x * y, 1);
  const idx = new Int32Array(n);
  const r = out.length;
  const strides: number[] = new Array(r).fill(0);
  let s = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    const o = r - dims.length + i;
    strides[o] = dims[i] === 1 ? 0 : s;
    s *= dims[i]!;
  }
  const coord = new Array<number>(r).fill(0);
  for (let k = 0; k < n; k++) {
    let f = 0;
    for (let i = 0; i < r; i++) f += coord[i]! * strides[i]!;
    idx[k] = f;
    for (let i = r - 1; i >= 0; i--) {
      if (++coord[i]! < out[i]!) break;
      coord[i] = 0;
    }
  }
  return idx;
}

export function mk(isFloat: boolean, dims: number[], values: ArrayLike<number>): ConstTensor {
  const data = isFloat ? Float32Array.from(values) : Float64Array.from(values);
  return { isFloat, dims, data };
}

export function binary(a: ConstTensor, b: ConstTensor, f: (x: number, y: number) => number, isFloat = a.isFloat): ConstTensor | undefined {
  const dims = broadcastDims(a.dims, b.dims);
  if (!dims) return undefined;
  const ia = broadcastIndex(a.dims, dims);
  const ib = broadcastIndex(b.dims, dims);
  const out = new Array<number>(ia.length);
  for (let k = 0; k < ia.length; k++) out[k] = f(a.data[ia[k]!]!, b.data[ib[k]!]!);
  return mk(isFloat, dims, out);
}

export function unary(a: ConstTensor, f: (x: number) => number): ConstTensor {
  return mk(a.isFloat, [...a.dims], Array.from(a.data, f));
}

/** erf with |error| < 1.2e-7 (Numerical Recipes erfc Chebyshev fit); JS has no Math.erf. */
export function erf(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
        t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? 1 - r : r - 1;
}

export const BINARY: Record<string, (x: number, y: number, isFloat: boolean) => number> = {
  Add: (x, y) => x + y,
  Sub: (x, y) => x - y,
  Mul: (x, y) => x * y,
  Div: (x, y, f) => (f ? x / y : Math.trunc(x / y)),
  Pow: (x, y) => x ** y,
  Min: (x, y) => Math.min(x, y),
  Max: (x, y) => Math.max(x, y),
  // x, or x times its slope where x is negative (the plan's PRelu: cpu/binary.cc)
  PRelu: (x, y) => (x < 0 ? x * y : x),
};

export const UNARY: Record<string, (x: number) => number> = {
  Neg: (x) => -x,
  Sqrt: Math.sqrt,
  Exp: Math.exp,
  Sin: Math.sin,
  Cos: Math.cos,
  Log: Math.log,
  Abs: Math.abs,
  Reciprocal: (x) => 1 / x,
  Floor: Math.floor,
  Ceil: Math.ceil,
  Relu: (x) => Math.max(0, x),
  Sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  Tanh: Math.tanh,
  Erf: erf,
  Not: (x) => (x ? 0 : 1),
  Sign: Math.sign,
};

/** A constant converted to another plan dtype (float -> int truncates, like ONNX Cast). */
export function castConst(c: ConstTensor, dtype: DType): ConstTensor {
  const isFloat = dtype === "float32";
  const conv = dtype === "bool" ? (v: number) => +(v !== 0) : isFloat ? (v: number) => v : Math.trunc;
  return { ...mk(isFloat, [...c.dims], Array.from(c.data, conv)), dtype, ...(c.sym ? { sym: true } : {}) };
}

/** ONNX Mod: fmod = 1 keeps the dividend's sign (C fmod), fmod = 0 the divisor's (integers). */
export function mod(a: number, b: number, fmod: boolean): number {
  if (fmod) return a % b;
  const r = a % b;
  return r !== 0 && (r < 0) !== (b < 0) ? r + b : r;
}
