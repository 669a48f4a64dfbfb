/** Serialise a plan with the byte layout of docs/plan-format.md and write it atomically. */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import { Packr } from "msgpackr";
import type { Built } from "./build.ts";
import type { BuiltPlan } from "./merge-profiles.ts";
import { Field, PLAN_ALIGNMENT, PLAN_MAGIC, PLAN_VERSION, PREAMBLE_BYTES, PROFILE_TABLE, alignUp, fnv1a64 } from "./plan-format.ts";

// Plain msgpack maps (no msgpackr record extension) so that any msgpack reader decodes it.
const packr = new Packr({ useRecords: false, variableMapSize: true });

export function encodeHeader(header: Built["header"]): Uint8Array {
  return packr.pack(header);
}

/**
 * The header region of a version 3 plan: the profile table (count, reserved, then one
 * {offset, length} from the file start a profile) followed by each profile's msgpack map.
 */
export function encodeProfiles(profiles: readonly Built["header"][]): Uint8Array {
  const maps = profiles.map(encodeHeader);
  const table = PROFILE_TABLE.entries + PROFILE_TABLE.entryBytes * maps.length;
  const out = Buffer.alloc(table + maps.reduce((a, m) => a + m.length, 0));
  out.writeUInt32LE(maps.length, PROFILE_TABLE.count);
  let at = table;
  maps.forEach((m, i) => {
    const e = PROFILE_TABLE.entries + PROFILE_TABLE.entryBytes * i;
    out.writeBigUInt64LE(BigInt(PREAMBLE_BYTES + at), e);
    out.writeBigUInt64LE(BigInt(m.length), e + 8);
    out.set(m, at);
    at += m.length;
  });
  return out;
}

/** The whole file as a list of chunks: preamble, header region, pad, weights (with pads). */
export function serialisePlan(built: Built | BuiltPlan): { chunks: Uint8Array[]; length: number } {
  const header = encodeProfiles("profiles" in built ? built.profiles : [built.header]);
  const blobOffset = alignUp(PREAMBLE_BYTES + header.length, PLAN_ALIGNMENT);
  const length = blobOffset + built.blobBytes;
  const pre = Buffer.alloc(PREAMBLE_BYTES);
  pre.write(PLAN_MAGIC, Field.magic, "ascii");
  pre.writeUInt32LE(PLAN_VERSION, Field.version);
  pre.writeUInt32LE(0, Field.flags);
  pre.writeBigUInt64LE(BigInt(PREAMBLE_BYTES), Field.headerOffset);
  pre.writeBigUInt64LE(BigInt(header.length), Field.headerLength);
  pre.writeBigUInt64LE(BigInt(blobOffset), Field.blobOffset);
  pre.writeBigUInt64LE(BigInt(built.blobBytes), Field.blobLength);
  pre.writeBigUInt64LE(BigInt(length), Field.fileLength);
  pre.writeBigUInt64LE(fnv1a64(header), Field.headerHash);
  const chunks: Uint8Array[] = [pre, header, new Uint8Array(blobOffset - PREAMBLE_BYTES - header.length)];
  let pos = 0;
  for (const w of built.weights) {
    if (w.offset > pos) chunks.push(new Uint8Array(w.offset - pos));
    chunks.push(w.data);
    pos = w.offset + w.data.byteLength;
  }
  if (built.blobBytes > pos) chunks.push(new Uint8Array(built.blobBytes - pos));
  return { chunks, length };
}

/**
 * Write to a temporary file next to the target, fsync, then rename: a reader (or a crash)
 * never sees a half-written plan, and a failed write leaves no file behind.
 */
export function writePlanFile(path: string, built: Built | BuiltPlan): number {
  const { chunks, length } = serialisePlan(built);
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  let fd: number | undefined;
  try {
    fd = openSync(tmp, "wx", 0o644);
    for (const c of chunks) {
      let off = 0;
      while (off < c.length) off += writeSync(fd, c, off, c.length - off);
    }
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, path);
  } catch (e) {
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  return length;
}
