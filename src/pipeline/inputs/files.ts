/**
 * `--inputs FILE`: real eval inputs from a NumPy `.npz` (np.savez or np.savez_compressed) or
 * a `.safetensors` file, one array per graph input, named as the input, in the model's own
 * layout (the batch at the model's batch axis). Only the formats' plain cases are read:
 * little-endian C-order arrays; zip64 archives (an array over 4 GiB) are refused by name.
 */
import { readFileSync } from "node:fs";
import { inflateRawSync } from "node:zlib";
import type { Tensor } from "../../transport/codec.ts";
import type { DType } from "../../transport/protocol.ts";
import { allocate } from "./tensor-data.ts";

const NPY_DTYPES: Record<string, DType> = { "<f4": "float32", "<f2": "float16", "<i8": "int64", "<i4": "int32", "|b1": "bool", "|u1": "uint8" };
const ST_DTYPES: Record<string, DType> = { F32: "float32", F16: "float16", I64: "int64", I32: "int32", BOOL: "bool", U8: "uint8" };

/** A file dtype memlane cannot feed: a float64 array is the usual case (np.random gives float64). */
export interface ForeignArray {
  foreign: string;
  shape: number[];
}

export type InputArray = Tensor | ForeignArray;

function typed(dtype: DType, bytes: Uint8Array, count: number): Tensor["data"] {
  const out = allocate(dtype, count);
  new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes.subarray(0, out.byteLength));
  return out;
}

function parseNpy(file: string, entry: string, b: Uint8Array): InputArray {
  const where = `${file}: ${entry}`;
  if (b[0] !== 0x93 || String.fromCharCode(...b.subarray(1, 6)) !== "NUMPY") throw new Error(`${where}: not a .npy array`);
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const major = b[6]!;
  const headerLen = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const start = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(b.subarray(start, start + headerLen));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || shapeText === undefined) throw new Error(`${where}: unreadable .npy header ${JSON.stringify(header.trim())}`);
  const shape = shapeText.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  if (fortran) throw new Error(`${where}: a Fortran-order array; save it with np.ascontiguousarray first`);
  const dtype = NPY_DTYPES[descr];
  if (!dtype) return { foreign: `numpy ${descr}`, shape };
  return { dtype, shape, data: typed(dtype, b.subarray(start + headerLen), shape.reduce((x, y) => x * y, 1)) };
}

/** name (without .npy) → the entry's bytes. */
function unzip(file: string, buf: Buffer): Map<string, Uint8Array> {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 22 - 65_535); i--)
    if (v.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd < 0) throw new Error(`${file}: not an .npz (zip) archive`);
  const count = v.getUint16(eocd + 10, true);
  let p = v.getUint32(eocd + 16, true);
  const out = new Map<string, Uint8Array>();
  for (let k = 0; k < count; k++) {
    if (v.getUint32(p, true) !== 0x02014b50) throw new Error(`${file}: corrupt zip central directory`);
    const method = v.getUint16(p + 10, true);
    const size = v.getUint32(p + 20, true);
    const nameLen = v.getUint16(p + 28, true);
    const local = v.getUint32(p + 42, true);
    const name = buf.subarray(p + 46, p + 46 + nameLen).toString("utf8");
    if (size === 0xffffffff || local === 0xffffffff) throw new Error(`${file}: ${name} is a zip64 entry (over 4 GiB), which memlane does not read`);
    const data = local + 30 + v.getUint16(local + 26, true) + v.getUint16(local + 28, true);
    const raw = buf.subarray(data, data + size);
    if (method !== 0 && method !== 8) throw new Error(`${file}: ${name} uses zip compression method ${method} (expected stored or deflate)`);
    out.set(name.replace(/\.npy$/, ""), method === 8 ? inflateRawSync(raw) : raw);
    p += 46 + nameLen + v.getUint16(p + 30, true) + v.getUint16(p + 32, true);
  }
  return out;
}

function readSafetensors(file: string, buf: Buffer): Map<string, InputArray> {
  const len = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + len).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const base = 8 + len;
  const out = new Map<string, InputArray>();
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const dtype = ST_DTYPES[t.dtype];
    if (!dtype) {
      out.set(name, { foreign: `safetensors ${t.dtype}`, shape: t.shape });
      continue;
    }
    const bytes = buf.subarray(base + t.data_offsets[0], base + t.data_offsets[1]);
    out.set(name, { dtype, shape: t.shape, data: typed(dtype, bytes, t.shape.reduce((x, y) => x * y, 1)) });
  }
  return out;
}

/** Every array of `file` by name; throws naming the file when it is neither format. */
export function readInputFile(file: string): Map<string, InputArray> {
  let buf: Buffer;
  try {
    buf = readFileSync(file);
  } catch (e) {
    throw new Error(`--inputs: cannot read ${file}: ${(e as Error).message}`, { cause: e });
  }
  if (/\.safetensors$/i.test(file)) return readSafetensors(file, buf);
  if (/\.npz$/i.test(file)) return new Map([...unzip(file, buf)].map(([k, b]) => [k, parseNpy(file, k, b)]));
  throw new Error(`--inputs: expected an .npz or .safetensors file, received ${JSON.stringify(file)}`);
}
