/**
 * Plan reader: validates exactly what memlane-rt's reader validates, in the same order
 * (docs/plan-format.md), and throws a PlanError naming the field, expected and found value.
 */
import { readFileSync } from "node:fs";
import { unpack } from "msgpackr";
import { PlanError } from "./errors.ts";
import { dataflowProblem } from "./plan-dataflow.ts";
import { perSample } from "./ir.ts";
import { Field, MAX_PROFILES, PLAN_ALIGNMENT, PLAN_DTYPE_BYTES, PLAN_MAGIC, PLAN_VERSION, PLAN_VERSION_SINGLE, PREAMBLE_BYTES, PROFILE_TABLE, type PlanDType, type PlanHeader, fnv1a64 } from "./plan-format.ts";

type Fail = (field: string, expected: string, found: unknown) => never;

export interface PlanFile {
  /** Profile 0 (the only one of a version 2 plan). */
  header: PlanHeader;
  /** Every shape profile, in plan order (docs/plan-format.md, "Profiles"). */
  profiles: PlanHeader[];
  version: number;
  /** The weights blob (a view into the file bytes). */
  blob: Uint8Array;
  fileLength: number;
}

export function readPlan(path: string): PlanFile {
  return parsePlan(readFileSync(path), path);
}

export function parsePlan(buf: Buffer, file: string): PlanFile {
  const fail = (field: string, expected: string, found: unknown): never => {
    throw new PlanError(file, field, expected, String(found));
  };
  if (buf.length < PREAMBLE_BYTES) fail("file length", `>= ${PREAMBLE_BYTES} bytes`, `${buf.length} bytes`);
  const magic = buf.subarray(Field.magic, Field.magic + 8).toString("latin1");
  if (magic !== PLAN_MAGIC) fail("magic", JSON.stringify(PLAN_MAGIC), JSON.stringify(magic));
  const version = buf.readUInt32LE(Field.version);
  if (version < PLAN_VERSION_SINGLE || version > PLAN_VERSION)
    fail("version", `${PLAN_VERSION_SINGLE} to ${PLAN_VERSION}${version < PLAN_VERSION_SINGLE ? " (an older plan: recompile it from its ONNX model with this memlane)" : ""}`, version);
  const u64 = (off: number): number => Number(buf.readBigUInt64LE(off));
  const headerOffset = u64(Field.headerOffset), headerLength = u64(Field.headerLength);
  if (headerOffset !== PREAMBLE_BYTES) fail("header offset", String(PREAMBLE_BYTES), headerOffset);
  if (headerOffset + headerLength > buf.length) fail("header length", `<= ${buf.length - headerOffset} (inside the file)`, headerLength);
  const headerBytes = buf.subarray(headerOffset, headerOffset + headerLength);
  const hash = buf.readBigUInt64LE(Field.headerHash), actual = fnv1a64(headerBytes);
  if (hash !== actual) fail("header hash", `0x${actual.toString(16)} (FNV-1a 64 of the header)`, `0x${hash.toString(16)}`);
  const blobOffset = u64(Field.blobOffset), blobLength = u64(Field.blobLength);
  if (blobOffset % PLAN_ALIGNMENT !== 0) fail("blob offset", `a multiple of ${PLAN_ALIGNMENT}`, blobOffset);
  if (blobOffset < headerOffset + headerLength) fail("blob offset", `>= ${headerOffset + headerLength} (after the header)`, blobOffset);
  if (blobOffset + blobLength > buf.length) fail("blob length", `<= ${Math.max(0, buf.length - blobOffset)} (inside the file)`, blobLength);
  const fileLength = u64(Field.fileLength);
  if (fileLength !== buf.length) fail("file length", `${buf.length} (the actual size)`, fileLength);
  if (fileLength !== blobOffset + blobLength) fail("file length", `${blobOffset + blobLength} (blob offset + blob length)`, fileLength);

  const regions = version === PLAN_VERSION_SINGLE ? [{ at: headerOffset, bytes: headerBytes }] : profileTable(headerBytes, headerOffset, fail);
  const profiles = regions.map((r, i) => {
    // One profile keeps a version 2 plan's field names; several name the profile first.
    const sub: Fail = regions.length > 1 ? (f, e, x) => fail(`profiles[${i}].${f}`, e, x) : fail;
    return checkProfile(r.bytes, blobLength, sub);
  });
  checkProfilesAgree(profiles, fail);
  return { header: profiles[0]!, profiles, version, blob: buf.subarray(blobOffset, blobOffset + blobLength), fileLength };
}

/**
 * The v3 profile table at the start of the header region: its count, then each entry's
 * {offset, length} inside the region after the table. Errors name the entry and its byte offset.
 */
function profileTable(region: Buffer, regionOffset: number, fail: Fail): { at: number; bytes: Buffer }[] {
  const at = (k: number) => `(profile table, byte ${regionOffset + k})`;
  if (region.length < PROFILE_TABLE.entries) fail(`profiles.count ${at(PROFILE_TABLE.count)}`, `a table of >= ${PROFILE_TABLE.entries} bytes`, `a header of ${region.length} bytes`);
  const count = region.readUInt32LE(PROFILE_TABLE.count);
  if (count < 1 || count > MAX_PROFILES) fail(`profiles.count ${at(PROFILE_TABLE.count)}`, `1..${MAX_PROFILES}`, count);
  const reserved = region.readUInt32LE(PROFILE_TABLE.reserved);
  if (reserved !== 0) fail(`profiles.reserved ${at(PROFILE_TABLE.reserved)}`, "0", reserved);
  const tableEnd = PROFILE_TABLE.entries + PROFILE_TABLE.entryBytes * count;
  if (tableEnd > region.length) fail(`profiles.count ${at(PROFILE_TABLE.count)}`, `a table that fits the ${region.length}-byte header (${count} entries need ${tableEnd})`, count);
  const out: { at: number; bytes: Buffer }[] = [];
  let prevEnd = regionOffset + tableEnd;
  for (let i = 0; i < count; i++) {
    const e = PROFILE_TABLE.entries + PROFILE_TABLE.entryBytes * i;
    const off = Number(region.readBigUInt64LE(e)), len = Number(region.readBigUInt64LE(e + 8));
    if (off < prevEnd || off > regionOffset + region.length) fail(`profiles[${i}].offset ${at(e)}`, `${prevEnd}..${regionOffset + region.length} (after the table and the previous profile, inside the header)`, off);
    if (len < 1 || off + len > regionOffset + region.length) fail(`profiles[${i}].length ${at(e + 8)}`, `1..${regionOffset + region.length - off} (inside the header)`, len);
    out.push({ at: off, bytes: region.subarray(off - regionOffset, off - regionOffset + len) });
    prevEnd = off + len;
  }
  return out;
}

/** Profiles differ only in non-batch dimensions: the same inputs and outputs (names, dtypes, ranks, batch axes). */
function checkProfilesAgree(profiles: PlanHeader[], fail: Fail): void {
  const sig = (h: PlanHeader, ids: number[]) => ids.map((id) => {
    const t = h.tensors[id]!;
    return `${t.name} ${t.dtype} rank ${t.shape.length} batch axis ${t.shape.indexOf(-1)}`;
  });
  const first = profiles[0]!;
  const seen = new Map<string, number>();
  profiles.forEach((h, i) => {
    for (const side of ["inputs", "outputs"] as const) {
      const a = sig(first, first[side]), b = sig(h, h[side]);
      if (a.length !== b.length) fail(`profiles[${i}].${side}`, `${a.length} tensors (as profiles[0])`, b.length);
      b.forEach((x, k) => x !== a[k] && fail(`profiles[${i}].${side}[${k}]`, `${a[k]} (as profiles[0])`, x));
    }
    const key = JSON.stringify(h.inputs.map((id) => h.tensors[id]!.shape));
    const j = seen.get(key);
    if (j !== undefined) fail(`profiles[${i}].inputs`, "shapes no other profile has", `those of profiles[${j}]`);
    seen.set(key, i);
  });
}

/** One profile's msgpack header: the checks of a version 2 header. */
function checkProfile(headerBytes: Buffer, blobLength: number, fail: Fail): PlanHeader {
  let header: PlanHeader;
  try {
    // A copy: msgpackr keeps the buffer it last decoded, and a view of the header would keep
    // the whole plan file it was read from (resnet50's 100 MB, in the orchestrator that then
    // runs node-ort: its import read 136 MiB over the estimate).
    header = unpack(Buffer.from(headerBytes)) as PlanHeader;
  } catch (e) {
    return fail("header", "one msgpack map", (e as Error).message);
  }
  if (!header || typeof header !== "object" || !Array.isArray(header.tensors) || !Array.isArray(header.ops) || !header.arena) {
    fail("header", "a map with tensors, inputs, outputs, ops, arena", JSON.stringify(Object.keys(header ?? {})));
  }
  const arena = header.arena.bytesPerSample;
  const inPlace = header.arena.concatInPlace;
  if (inPlace !== undefined && typeof inPlace !== "boolean") fail("arena.concatInPlace", "true or false", JSON.stringify(inPlace));
  header.tensors.forEach((t, i) => {
    const where = `tensors[${i}] ("${t.name}")`;
    const esize = Object.hasOwn(PLAN_DTYPE_BYTES, t.dtype) ? PLAN_DTYPE_BYTES[t.dtype as PlanDType] : undefined;
    if (esize === undefined) fail(`${where}.dtype`, `one of ${Object.keys(PLAN_DTYPE_BYTES).join(", ")}`, JSON.stringify(t.dtype));
    if (!Array.isArray(t.shape) || t.shape.some((d) => !Number.isInteger(d))) fail(`${where}.shape`, "a list of integers", JSON.stringify(t.shape));
    const batchDims = t.shape.filter((d) => d < 0).length;
    if (t.kind === "weight" ? batchDims !== 0 : batchDims !== 1) fail(`${where}.shape`, t.kind === "weight" ? "no negative entry (a weight has no batch)" : "exactly one entry -k (k·batch)", JSON.stringify(t.shape));
    if (t.kind !== "weight" && t.kind !== "activation" && !t.shape.includes(-1)) fail(`${where}.shape`, "a plain batch entry -1 (graph inputs and outputs)", JSON.stringify(t.shape));
    if (t.bytes !== perSample(t.shape) * esize!) fail(`${where}.bytes`, `${perSample(t.shape) * esize!} (${t.dtype} x shape${t.kind === "weight" ? "" : ", per sample"})`, t.bytes);
    if (t.kind === "weight") {
      if (t.offset % PLAN_ALIGNMENT !== 0) fail(`${where}.offset`, `a multiple of ${PLAN_ALIGNMENT}`, t.offset);
      if (t.offset + t.bytes > blobLength) fail(`${where} offset + bytes`, `<= blob length ${blobLength}`, t.offset + t.bytes);
    } else {
      if (t.offset % PLAN_ALIGNMENT !== 0) fail(`${where}.offset`, `a multiple of ${PLAN_ALIGNMENT}`, t.offset);
      if (t.offset + t.bytes > arena) fail(`${where} offset + bytes`, `<= arena bytesPerSample ${arena}`, t.offset + t.bytes);
    }
  });
  const n = header.tensors.length;
  const checkIds = (where: string, ids: number[], allowAbsent: boolean) =>
    ids.forEach((id, k) => (id < (allowAbsent ? -1 : 0) || id >= n) && fail(`${where}[${k}]`, `a tensor id in [0, ${n})`, id));
  checkIds("inputs", header.inputs, false);
  checkIds("outputs", header.outputs, false);
  header.ops.forEach((op, i) => {
    checkIds(`ops[${i}] (${op.op} "${op.name}").inputs`, op.inputs, true);
    checkIds(`ops[${i}] (${op.op} "${op.name}").outputs`, op.outputs, false);
  });
  const dataflow = dataflowProblem(header);
  if (dataflow) fail(...dataflow);
  return header;
}

/**
 * A weight's values in its dtype (copied: blob offsets are 64-aligned only relative to the
 * blob): Float32Array, Float64Array (int64, exact to 2^53), Int32Array, or Uint8Array (bool).
 */
export function weightData(plan: PlanFile, id: number, profile = 0): Float32Array | Float64Array | Int32Array | Uint8Array {
  const t = plan.profiles[profile]!.tensors[id]!;
  // Uint8Array's slice copies (Buffer's would not), giving a fresh, aligned buffer.
  const bytes = Uint8Array.prototype.slice.call(plan.blob, t.offset, t.offset + t.bytes);
  if (t.dtype === "int64") return Float64Array.from(new BigInt64Array(bytes.buffer, 0, t.bytes / 8), Number);
  if (t.dtype === "int32") return new Int32Array(bytes.buffer, 0, t.bytes / 4);
  if (t.dtype === "bool") return bytes;
  return new Float32Array(bytes.buffer, 0, t.bytes / 4);
}
