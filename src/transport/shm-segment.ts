/**
 * One POSIX shared-memory segment as the transport uses it: through the addon's
 * SharedMemory class (shm_open + mmap, the bytes seen in place as an ArrayBuffer) when the
 * addon has it, else through plain file calls on /dev/shm (on Linux shm_open(name) is
 * open("/dev/shm/name")), which costs one more copy on the reading side but needs no build.
 */
import { closeSync, fstatSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync, constants } from "node:fs";
import { join } from "node:path";
import { loadAddon } from "../memory/gpu-addon.ts";

export const SHM_DIR = "/dev/shm";

/** The addon's SharedMemory class (native/addon/src/shared_memory.h). */
export interface NativeSharedMemory {
  readonly name: string;
  readonly size: number;
  readonly readOnly: boolean;
  readonly buffer: ArrayBuffer;
  close(options?: { unmap?: boolean }): void;
}
export interface NativeSharedMemoryClass {
  new (name: string, options: { create?: boolean; size?: number; readOnly?: boolean; populate?: boolean }): NativeSharedMemory;
  unlink(name: string): boolean;
}

export interface ShmSegment {
  readonly name: string;
  readonly size: number;
  /** The mapping, when the addon is in use; null on the file fallback. */
  readonly bytes: Uint8Array | null;
  write(offset: number, data: Uint8Array): void;
  /** A view of the mapping (addon) or a copy (file fallback). */
  read(offset: number, length: number): Uint8Array;
  /**
   * Drops this process's handle; the segment itself lives until unlinked. Views made with
   * read() keep the mapping alive, unless `unmap` is set: then the mapping is freed now and
   * every view of it reads as empty (for a producer that is done with the segment).
   */
  close(options?: { unmap?: boolean }): void;
}

/** Thrown for anything the kernel refuses; `code` matches ErrorCode.SHM_UNAVAILABLE's name. */
export class ShmError extends Error {
  readonly code = "SHM_UNAVAILABLE";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ShmError";
  }
}

/** Same rule as the addon and python/memlane_worker/shm.py. */
export const SEGMENT_NAME = /^[A-Za-z0-9._-]{1,250}$/;

let nativeClass: NativeSharedMemoryClass | null | undefined;
let nativeWhy = "";

/** The addon's SharedMemory, or null (with the reason in `shmBackend()`) when unavailable. */
export function nativeSharedMemory(addonPath?: string): NativeSharedMemoryClass | null {
  if (nativeClass !== undefined && addonPath === undefined) return nativeClass;
  let found: NativeSharedMemoryClass | null = null;
  try {
    const addon = loadAddon(addonPath);
    found = (addon.SharedMemory as NativeSharedMemoryClass | undefined) ?? null;
    nativeWhy = found ? "" : "the addon was built without SharedMemory (native/addon/src/shared_memory.cc)";
  } catch (err) {
    nativeWhy = (err as Error).message;
  }
  if (addonPath === undefined) nativeClass = found;
  return found;
}

/** Which implementation segments use, and why the addon is not used when it is not. */
export function shmBackend(addonPath?: string): { kind: "addon" | "file"; reason?: string } {
  return nativeSharedMemory(addonPath) ? { kind: "addon" } : { kind: "file", reason: nativeWhy };
}

function checkName(name: string): void {
  if (!SEGMENT_NAME.test(name) || name === "." || name === "..")
    throw new TypeError(`shared memory segment name must match ${SEGMENT_NAME}, got ${JSON.stringify(name)}`);
}

function checkRange(seg: { name: string; size: number }, offset: number, length: number): void {
  if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0 || offset + length > seg.size)
    throw new RangeError(`shm range [${offset}, ${offset + length}) lies outside segment ${seg.name} of ${seg.size} bytes`);
}

function wrapNative(shm: NativeSharedMemory): ShmSegment {
  let bytes: Uint8Array | null = new Uint8Array(shm.buffer);
  const live = (): Uint8Array => {
    if (!bytes) throw new ShmError(`shared memory segment ${shm.name} is closed`);
    return bytes;
  };
  return {
    name: shm.name,
    size: shm.size,
    get bytes() { return bytes; },
    write(offset, data) { checkRange(shm, offset, data.byteLength); live().set(data, offset); },
    read(offset, length) { checkRange(shm, offset, length); return live().subarray(offset, offset + length); },
    close(options) { bytes = null; shm.close(options); },
  };
}

function fileSegment(name: string, fd: number, size: number): ShmSegment {
  let open = true;
  const live = () => { if (!open) throw new ShmError(`shared memory segment ${name} is closed`); };
  return {
    name,
    size,
    bytes: null,
    write(offset, data) {
      live(); checkRange({ name, size }, offset, data.byteLength);
      for (let done = 0; done < data.byteLength;) done += writeSync(fd, data, done, data.byteLength - done, offset + done);
    },
    read(offset, length) {
      live(); checkRange({ name, size }, offset, length);
      const out = new Uint8Array(length);
      for (let done = 0; done < length;) {
        const n = readSync(fd, out, done, length - done, offset + done);
        if (n === 0) throw new ShmError(`segment ${name} ended early at byte ${offset + done}`);
        done += n;
      }
      return out;
    },
    close() { if (open) { open = false; closeSync(fd); } },
  };
}

const fail = (what: string, name: string, err: unknown) =>
  new ShmError(`${what} shared memory segment ${name} failed: ${(err as Error).message}`, { cause: err });

/**
 * Creates a new segment (fails if the name exists), mode 0600. `mapped` maps it here (addon)
 * so that a producer can compute into `bytes` in place; unmapped, write() copies with
 * pwrite, which is the cheaper way to copy an existing buffer in: the kernel fills the
 * segment's pages directly, without zero-filling them first or faulting them into this
 * process (measured in bench/transport-shm.ts).
 */
export function createSegment(name: string, size: number, addonPath?: string, mapped = false): ShmSegment {
  checkName(name);
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`segment size must be a non-negative integer, got ${size}`);
  const Native = mapped ? nativeSharedMemory(addonPath) : null;
  try {
    // populate: the caller is about to fill it, and one pre-fault beats a fault per page.
    if (Native) return wrapNative(new Native(name, { create: true, size, populate: true }));
    const fd = openSync(join(SHM_DIR, name), constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      ftruncateSync(fd, size);
    } catch (err) {
      closeSync(fd);
      unlinkSegment(name);
      throw err;
    }
    return fileSegment(name, fd, size);
  } catch (err) {
    throw err instanceof ShmError ? err : fail("creating", name, err);
  }
}

/** Opens an existing segment, read-only (a write through `bytes` stays private). */
export function openSegment(name: string, addonPath?: string): ShmSegment {
  checkName(name);
  const Native = nativeSharedMemory(addonPath);
  try {
    if (Native) return wrapNative(new Native(name, { readOnly: true }));
    const fd = openSync(join(SHM_DIR, name), constants.O_RDONLY);
    return fileSegment(name, fd, fstatSync(fd).size);
  } catch (err) {
    throw fail("opening", name, err);
  }
}

/** Removes a segment's name; true if it existed. Mappings already made stay valid. */
export function unlinkSegment(name: string, addonPath?: string): boolean {
  checkName(name);
  const Native = nativeSharedMemory(addonPath);
  if (Native) return Native.unlink(name);
  try {
    unlinkSync(join(SHM_DIR, name));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw fail("unlinking", name, err);
  }
}
