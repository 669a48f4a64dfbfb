/**
 * The `.mlplan` byte layout, magic and version: defined once here on the TypeScript side
 * (native/runtime/src/plan/plan_format.h mirrors it). See docs/plan-format.md.
 */

/** ASCII `MLRTPLAN`, the first 8 bytes of every plan. */
export const PLAN_MAGIC = "MLRTPLAN";
/**
 * Bumped on any incompatible change to the layout or the header schema. Version 4 may lay
 * Concat inputs inside their output (`arena.concatInPlace`: such a plan must run one sample
 * at a time, which a version 3 reader would not know); version 3 holds several shape profiles
 * (a profile table in the header region, as in 4); version 2 plans (one profile, the header
 * region one msgpack map) are still read, as are version 3 plans.
 */
export const PLAN_VERSION = 4;
/** The single-profile layout that readers still accept. */
export const PLAN_VERSION_SINGLE = 2;
/** Profile table (v3): u32 count, u32 reserved, then one {u64 offset, u64 length} a profile. */
export const PROFILE_TABLE = { count: 0, reserved: 4, entries: 8, entryBytes: 16 } as const;
/** Profiles a plan may hold (a sanity bound for readers of a corrupt count). */
export const MAX_PROFILES = 64;
/** Fixed preamble size; the header starts right after it. */
export const PREAMBLE_BYTES = 64;
/** Alignment of the blob, of every weight in it and of every arena offset. */
export const PLAN_ALIGNMENT = 64;

/** Preamble field offsets (all little-endian). */
export const Field = {
  magic: 0,
  version: 8,
  flags: 12,
  headerOffset: 16,
  headerLength: 24,
  blobOffset: 32,
  blobLength: 40,
  fileLength: 48,
  headerHash: 56,
} as const;

export type TensorKind = "input" | "output" | "activation" | "weight";

export type PlanDType = "float32" | "int64" | "int32" | "bool";
/** Bytes an element of each plan dtype (bool one byte). The reader refuses every other type, the replay-only ones of ir.ts DType too. */
export const PLAN_DTYPE_BYTES: Readonly<Record<PlanDType, number>> = Object.freeze({ float32: 4, int64: 8, int32: 4, bool: 1 });

export interface PlanTensor {
  name: string;
  dtype: PlanDType;
  /** Non-weights: exactly one entry -k, the batch times k (k = 1 for graph inputs and outputs). */
  shape: number[];
  kind: TensorKind;
  /** Weight: from the blob start. Others: arena offset per sample. */
  offset: number;
  /** Weight: total bytes. Others: bytes per sample. */
  bytes: number;
}

export type AttrValue = number | string | number[];

export interface PlanOp {
  op: string;
  name: string;
  /** Tensor ids; -1 = absent optional input. */
  inputs: number[];
  outputs: number[];
  attrs: Record<string, AttrValue>;
}

export interface PlanHeader {
  producer: string;
  source: string;
  tensors: PlanTensor[];
  inputs: number[];
  outputs: number[];
  ops: PlanOp[];
  /**
   * concatInPlace: some Concat inputs lie inside their Concat's output, one sample's slice
   * (concat-in-place.ts), so the plan must run one sample at a time. Absent: false.
   */
  arena: { bytesPerSample: number; lowerBoundPerSample: number; alignment: number; concatInPlace?: boolean };
}

export function alignUp(n: number, a: number = PLAN_ALIGNMENT): number {
  return Math.ceil(n / a) * a;
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = 0xffffffffffffffffn;

/** FNV-1a 64 over the header bytes; cheap, and enough to catch a corrupt header. */
export function fnv1a64(bytes: Uint8Array): bigint {
  // Split into two 32-bit halves to avoid a BigInt multiply per byte (headers can be
  // hundreds of KB for large graphs).
  let hi = Number(FNV_OFFSET >> 32n) >>> 0;
  let lo = Number(FNV_OFFSET & 0xffffffffn) >>> 0;
  for (let i = 0; i < bytes.length; i++) {
    lo = (lo ^ bytes[i]!) >>> 0;
    // (hi:lo) * (0x100 << 32 | 0x1b3) mod 2^64; lo * 0x1b3 < 2^41 is exact in a double.
    const p = lo * 0x1b3;
    const carry = Math.floor(p / 0x100000000);
    hi = (Math.imul(hi, 0x1b3) + Math.imul(lo, 0x100) + carry) >>> 0;
    lo = p >>> 0;
  }
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** Reference (slow) implementation, used by the tests to check the fast one. */
export function fnv1a64Reference(bytes: Uint8Array): bigint {
  let h = FNV_OFFSET;
  for (const b of bytes) h = ((h ^ BigInt(b)) * FNV_PRIME) & MASK64;
  return h;
}
