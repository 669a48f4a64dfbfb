/** ONNX TensorProto -> ConstTensor: raw_data, typed fields, or an external data file. */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { isAbsolute, join, normalize } from "node:path";
import onnxProto from "onnx-proto";
import { CompileError } from "./errors.ts";
import type { ConstTensor, QuantType } from "./ir.ts";

const DT = onnxProto.onnx.TensorProto.DataType;
type ITensorProto = onnxProto.onnx.ITensorProto;

/** protobufjs hands int64 fields back as Long objects (or numbers without `long`). */
export function toNum(v: unknown): number {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  if (v && typeof v === "object" && "toNumber" in v) return (v as { toNumber(): number }).toNumber();
  return Number(v);
}

const ELEM_BYTES: Partial<Record<number, number>> = {
  [DT.FLOAT]: 4, [DT.DOUBLE]: 8, [DT.FLOAT16]: 2, [DT.INT64]: 8, [DT.INT32]: 4,
  [DT.INT16]: 2, [DT.INT8]: 1, [DT.UINT8]: 1, [DT.UINT16]: 2, [DT.UINT32]: 4, [DT.UINT64]: 8, [DT.BOOL]: 1,
};

export function isFloatType(t: number): boolean {
  return t === DT.FLOAT || t === DT.DOUBLE || t === DT.FLOAT16;
}

export function decodeTensor(t: ITensorProto, modelDir: string, path: string): ConstTensor {
  const dims = (t.dims ?? []).map(toNum);
  const n = dims.reduce((a, b) => a * b, 1);
  const type = t.dataType ?? 0;
  const esize = ELEM_BYTES[type];
  if (esize === undefined) {
    throw new CompileError(`${path}: tensor "${t.name}" has unsupported data type ${DT[type] ?? type}`, "invalid-model", { tensor: t.name });
  }
  const isFloat = isFloatType(type);
  // A bool initializer stays bool (a mask's Where condition); other integers plan as int64.
  const typed = type === DT.BOOL ? { dtype: "bool" as const } : {};
  const out = isFloat ? new Float32Array(n) : new Float64Array(n);
  let raw: Uint8Array | undefined;
  let external: ConstTensor["external"];
  if (t.dataLocation === onnxProto.onnx.TensorProto.DataLocation.EXTERNAL) ({ raw, at: external } = readExternal(t, modelDir, path, n * esize));
  else if (t.rawData && t.rawData.length > 0) raw = t.rawData;

  if (raw) {
    if (raw.length !== n * esize) {
      throw new CompileError(`${path}: tensor "${t.name}" holds ${raw.length} bytes, its shape [${dims}] needs ${n * esize}`, "invalid-model", { tensor: t.name });
    }
    const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < n; i++) out[i] = readElem(dv, type, i * esize);
    return { isFloat, dims, data: out, ...typed, fileType: type, ...(external ? { external } : {}) };
  }
  // Typed fields: float_data (FLOAT, FLOAT16 as bits in int32_data), int32_data (INT32 and
  // narrower ints, BOOL, FLOAT16 bits), int64_data, double_data, uint64_data.
  let src: ArrayLike<unknown>;
  if (type === DT.FLOAT) src = t.floatData ?? [];
  else if (type === DT.DOUBLE) src = t.doubleData ?? [];
  else if (type === DT.INT64) src = t.int64Data ?? [];
  else if (type === DT.UINT64 || type === DT.UINT32) src = t.uint64Data ?? [];
  else src = t.int32Data ?? [];
  if (src.length !== n) {
    throw new CompileError(`${path}: tensor "${t.name}" has ${src.length} values, its shape [${dims}] needs ${n}`, "invalid-model", { tensor: t.name });
  }
  for (let i = 0; i < n; i++) {
    const v = toNum(src[i]);
    out[i] = type === DT.FLOAT16 ? halfToFloat(v) : v;
  }
  return { isFloat, dims, data: out, ...typed, fileType: type };
}

/** Bytes an element of this constant takes in the ONNX file (its plan dtype's where it came from no file). */
export function fileElemBytes(c: ConstTensor): number {
  return (c.fileType !== undefined ? ELEM_BYTES[c.fileType] : undefined) ?? (c.isFloat ? 4 : c.dtype === "bool" ? 1 : c.dtype === "int32" ? 4 : 8);
}

/** A quantized type and its ONNX element type (TensorProto.DataType). */
const QUANT_TYPES: ReadonlyArray<[QuantType, number]> = [["uint8", DT.UINT8], ["int8", DT.INT8], ["uint16", DT.UINT16], ["int16", DT.INT16]];

/** The quantized integer type an ONNX element type names (8- or 16-bit), or undefined. */
export function quantTypeOfOnnx(type: number | undefined): QuantType | undefined {
  return QUANT_TYPES.find(([, t]) => t === type)?.[0];
}

/** The ONNX element type of a quantized integer type. */
export const onnxTypeOfQuant = (q: QuantType): number => QUANT_TYPES.find(([t]) => t === q)![1];

/** The quantized integer type of a constant as the file stores it (a zero point's), or undefined. */
export function fileQuantType(c: ConstTensor): QuantType | undefined {
  return quantTypeOfOnnx(c.fileType);
}

/** The values a quantized type holds, [lowest, highest]. */
export function quantRange(q: QuantType): [number, number] {
  const bits = q.endsWith("16") ? 16 : 8;
  return q.startsWith("u") ? [0, 2 ** bits - 1] : [-(2 ** (bits - 1)), 2 ** (bits - 1) - 1];
}

function readElem(dv: DataView, type: number, off: number): number {
  switch (type) {
    case DT.FLOAT: return dv.getFloat32(off, true);
    case DT.DOUBLE: return dv.getFloat64(off, true);
    case DT.FLOAT16: return halfToFloat(dv.getUint16(off, true));
    case DT.INT64: return Number(dv.getBigInt64(off, true));
    case DT.UINT64: return Number(dv.getBigUint64(off, true));
    case DT.INT32: return dv.getInt32(off, true);
    case DT.UINT32: return dv.getUint32(off, true);
    case DT.INT16: return dv.getInt16(off, true);
    case DT.UINT16: return dv.getUint16(off, true);
    case DT.INT8: return dv.getInt8(off);
    default: return dv.getUint8(off); // UINT8, BOOL
  }
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

function readExternal(t: ITensorProto, modelDir: string, path: string, want: number): { raw: Uint8Array; at: NonNullable<ConstTensor["external"]> } {
  const kv = new Map((t.externalData ?? []).map((e) => [e.key ?? "", e.value ?? ""]));
  const location = kv.get("location");
  if (!location) throw new CompileError(`${path}: tensor "${t.name}" is stored externally but names no location`, "invalid-model", { tensor: t.name });
  // The ONNX spec requires a relative path inside the model's directory; refuse escapes.
  const rel = normalize(location);
  if (isAbsolute(rel) || rel.startsWith("..")) {
    throw new CompileError(`${path}: tensor "${t.name}" external data location "${location}" leaves the model directory`, "invalid-model", { tensor: t.name });
  }
  const file = join(modelDir, rel);
  const offset = Number(kv.get("offset") ?? 0);
  const length = kv.has("length") ? Number(kv.get("length")) : want;
  let size: number;
  try {
    size = statSync(file).size;
  } catch (e) {
    throw new CompileError(`${path}: tensor "${t.name}" external data file ${file} cannot be read: ${(e as Error).message}`, "unreadable-model", { tensor: t.name, file }, { cause: e });
  }
  if (offset + length > size) {
    throw new CompileError(`${path}: tensor "${t.name}" external data ${file} is ${size} bytes, needs ${offset + length}`, "invalid-model", { tensor: t.name, file });
  }
  const buf = Buffer.alloc(length);
  const fd = openSync(file, "r");
  try {
    readSync(fd, buf, 0, length, offset);
  } finally {
    closeSync(fd);
  }
  return { raw: buf, at: { location: rel, offset, length } };
}
