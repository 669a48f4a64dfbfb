/**
 * Shared-memory tensors between processes on one host (docs/protocol.md: a TensorRef may
 * carry `shm: {segment, offset, length}` instead of `frame`). A tensor of at least
 * `thresholdBytes` (1 MiB by default) is copied once into a POSIX segment that the receiver
 * maps, instead of travelling through the socket as a frame.
 *
 * Segments are named `memlane-<orchestrator pid>-<runId>-<n>`. A run's ShmRegistry unlinks
 * every segment it made when the run ends (close()), when the process exits, and on
 * SIGINT/SIGTERM; `sweepStaleSegments()` at start-up unlinks the segments of orchestrators
 * that died without doing so (SIGKILL, crash).
 */
import { decodeTensors, setShmResolver, type Tensor, type TensorData } from "./codec.ts";
import { DTYPE_BYTES, type DType, type TensorRef } from "./protocol.ts";
import { createSegment, openSegment, ShmError, unlinkSegment, type ShmSegment } from "./shm-segment.ts";
import { sanitizeRunId, segmentName, sweepStaleSegments } from "./shm-sweep.ts";

export { shmBackend, ShmError, type ShmSegment } from "./shm-segment.ts";
export { parseSegmentName, sanitizeRunId, segmentName, sweepStaleSegments } from "./shm-sweep.ts";

export const DEFAULT_SHM_THRESHOLD = 1 << 20;
/** What a worker lists in hello.capabilities when it reads `shm` TensorRefs. */
export const SHM_CAPABILITY = "shm";
/** Tensors in one segment start on 64-byte boundaries (cache line; any dtype's alignment). */
const ALIGN = 64;

export interface ShmRegistryOptions {
  /** The run the segments belong to; characters outside [A-Za-z0-9._-] become "_". */
  runId: string;
  /** Tensors of at least this many bytes go through shared memory (default 1 MiB). */
  thresholdBytes?: number;
  /** Unlink on process exit, SIGINT and SIGTERM (default true). */
  exitHooks?: boolean;
  /**
   * Sweep segments of dead orchestrators (sweepStaleSegments) when this process makes its
   * first registry: the start-up sweep that covers an orchestrator crash. Default true,
   * unless the environment says MEMLANE_SHM_SWEEP=0 (the test suite does, so that parallel
   * test files do not sweep the segments another file is watching).
   */
  sweep?: boolean;
  /** Path of memlane.node (default: $MEMLANE_ADDON or native/build/addon/memlane.node). */
  addonPath?: string;
}

const live = new Set<ShmRegistry>();
let hooked = false;
let swept = false;
/** Per run id, process-wide: two registries of one run never pick the same name. */
const nextIndex = new Map<string, number>();

function unlinkAllLive(): void {
  for (const r of live) r.close();
}

function onSignal(signal: NodeJS.Signals): void {
  unlinkAllLive();
  // We only cleaned up: if nobody else handles the signal, die of it as we would have.
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

function installHooks(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", unlinkAllLive);
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

/** Owns the segments of one run in this process. */
export class ShmRegistry {
  readonly runId: string;
  readonly thresholdBytes: number;
  readonly addonPath: string | undefined;
  private readonly segments = new Map<string, ShmSegment>();
  /** Mapped segments by their ArrayBuffer: a tensor already in one is sent without a copy. */
  private readonly byBuffer = new WeakMap<ArrayBufferLike, ShmSegment>();
  private closed = false;
  /** Segments made and their bytes over the registry's life (for the run's summary). */
  readonly made = { segments: 0, bytes: 0 };
  /** Tensors sent as `shm` refs and their bytes (a run-long segment counts once per send). */
  readonly sent = { tensors: 0, bytes: 0 };

  constructor(options: ShmRegistryOptions) {
    if (typeof options?.runId !== "string" || !options.runId)
      throw new TypeError(`ShmRegistry option \`runId\`: expected a non-empty string, got ${JSON.stringify(options?.runId)}`);
    const t = options.thresholdBytes ?? DEFAULT_SHM_THRESHOLD;
    if (!Number.isSafeInteger(t) || t < 0)
      throw new TypeError(`ShmRegistry option \`thresholdBytes\`: expected a non-negative integer, got ${JSON.stringify(t)}`);
    this.runId = sanitizeRunId(options.runId);
    this.thresholdBytes = t;
    this.addonPath = options.addonPath;
    if ((options.sweep ?? process.env.MEMLANE_SHM_SWEEP !== "0") && !swept) {
      swept = true;
      sweepStaleSegments({ addonPath: this.addonPath });
    }
    live.add(this);
    if (options.exitHooks ?? true) installHooks();
  }

  /** Names of the segments this registry made and has not released. */
  get names(): string[] {
    return [...this.segments.keys()];
  }

  /**
   * A new segment of `size` bytes, unlinked at the latest when the run ends. `mapped`: map it
   * here (addon; file-backed without it) to fill `bytes` in place.
   */
  allocate(size: number, options: { mapped?: boolean } = {}): ShmSegment {
    if (this.closed) throw new Error(`ShmRegistry of run ${this.runId} is closed`);
    const n = nextIndex.get(this.runId) ?? 0;
    nextIndex.set(this.runId, n + 1);
    const seg = createSegment(segmentName(process.pid, this.runId, n), size, this.addonPath, options.mapped ?? false);
    this.segments.set(seg.name, seg);
    if (seg.bytes) this.byBuffer.set(seg.bytes.buffer, seg);
    this.made.segments++;
    this.made.bytes += size;
    return seg;
  }

  /**
   * A tensor whose data lives in a new mapped segment of its own, for a producer to fill in
   * place: encodeTensorsShm then references it where it lies, with no copy at all, and it
   * can be sent any number of times (the receivers map it once: python/memlane_worker/shm.py).
   * The caller owns the segment: release(segment.name) when done, else it goes with the run.
   * Without the addon the segment is file-backed and this throws.
   */
  allocateTensor(dtype: DType, shape: readonly number[]): { tensor: Tensor; segment: ShmSegment } {
    const n = shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[dtype];
    const segment = this.allocate(n, { mapped: true });
    if (!segment.bytes) {
      this.release(segment.name);
      throw new ShmError("allocateTensor needs the addon's SharedMemory (a mapping to fill in place); see shmBackend()");
    }
    const C = CTORS[dtype];
    return { tensor: { dtype, shape: [...shape], data: new C(segment.bytes.buffer, 0, n / C.BYTES_PER_ELEMENT) }, segment };
  }

  /** The live mapped segment that holds `data`'s bytes, if any. */
  segmentOf(data: TensorData): ShmSegment | undefined {
    const seg = this.byBuffer.get(data.buffer);
    return seg && this.segments.get(seg.name) === seg && seg.bytes ? seg : undefined;
  }

  /**
   * Unlinks one segment early (its receiver is done with it) and unmaps it here now, rather
   * than when the garbage collector gets to it: views of its `bytes` read as empty after.
   */
  release(name: string): void {
    const seg = this.segments.get(name);
    if (!seg) return;
    this.segments.delete(name);
    if (seg.bytes) this.byBuffer.delete(seg.bytes.buffer);
    seg.close({ unmap: true });
    unlinkSegment(name, this.addonPath);
  }

  /** Unlinks every segment of the run. Safe to call more than once (and from 'exit'). */
  close(): void {
    for (const name of [...this.segments.keys()]) {
      try {
        this.release(name);
      } catch {
        // keep going: one refused unlink must not leave the others behind
      }
    }
    this.closed = true;
    live.delete(this);
  }
}

const byteLength = (t: Tensor): number => t.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[t.dtype];

/**
 * Like codec.encodeTensors, but every tensor of at least `registry.thresholdBytes` is copied
 * into one new segment (offsets 64-byte aligned) and referenced by `shm`; smaller ones
 * travel as frames. A tensor that already lies in one of the registry's mapped segments
 * (registry.allocateTensor) is referenced where it is, not copied, whatever its size; that
 * segment stays the caller's. `segment` is the new segment, null when nothing was copied
 * (the caller releases it when the receiver is done). The copy is a pwrite unless `mapped`
 * asks for mmap + memcpy (slower for a fresh segment: see createSegment).
 */
export function encodeTensorsShm(
  tensors: Readonly<Record<string, Tensor>>,
  registry: ShmRegistry,
  firstFrame = 0,
  options: { mapped?: boolean } = {},
): { refs: TensorRef[]; frames: Buffer[]; segment: ShmSegment | null } {
  let total = 0;
  const offsets = new Map<string, number>();
  const inPlace = new Map<string, ShmSegment>();
  for (const [name, t] of Object.entries(tensors)) {
    const n = byteLength(t);
    if (t.data.byteLength !== n)
      throw new RangeError(`tensor "${name}": data has ${t.data.byteLength} bytes, expected ${n} (shape [${t.shape.join(", ")}] x ${t.dtype})`);
    const owner = n > 0 ? registry.segmentOf(t.data) : undefined;
    if (owner) inPlace.set(name, owner);
    else if (n >= registry.thresholdBytes && n > 0) {
      offsets.set(name, total);
      total = Math.ceil((total + n) / ALIGN) * ALIGN;
    }
  }
  const segment = offsets.size ? registry.allocate(total, options) : null;
  const refs: TensorRef[] = [];
  const frames: Buffer[] = [];
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const offset = offsets.get(name);
    const owner = inPlace.get(name);
    if (owner) {
      refs.push({ name, dtype: t.dtype, shape: [...t.shape], shm: { segment: owner.name, offset: bytes.byteOffset, length: bytes.byteLength } });
      registry.sent.tensors++;
      registry.sent.bytes += bytes.byteLength;
    } else if (segment && offset !== undefined) {
      segment.write(offset, bytes);
      refs.push({ name, dtype: t.dtype, shape: [...t.shape], shm: { segment: segment.name, offset, length: bytes.byteLength } });
      registry.sent.tensors++;
      registry.sent.bytes += bytes.byteLength;
    } else {
      refs.push({ name, dtype: t.dtype, shape: [...t.shape], frame: firstFrame + frames.length });
      frames.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    }
  }
  return { refs, frames, segment };
}

type Ctor = { new (b: ArrayBufferLike, o: number, n: number): TensorData; BYTES_PER_ELEMENT: number };
const CTORS: Readonly<Record<DType, Ctor>> = {
  float32: Float32Array, float16: Uint16Array, int64: BigInt64Array, int32: Int32Array, uint8: Uint8Array, bool: Uint8Array,
};

/**
 * Like codec.decodeTensors, resolving `shm` refs too: each is a view of the mapped segment
 * (addon) or a copy (file fallback). A view stays valid after the segment is unlinked.
 */
export function decodeTensorsShm(refs: readonly TensorRef[] | undefined, frames: readonly Uint8Array[], addonPath?: string): Record<string, Tensor> {
  const out = decodeTensors(refs?.filter((r) => !r.shm), frames);
  const opened = new Map<string, ShmSegment>();
  try {
    for (const ref of refs ?? []) {
      if (!ref.shm) continue;
      const { segment, offset, length } = ref.shm;
      const want = ref.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[ref.dtype];
      if (length !== want)
        throw new RangeError(`tensor "${ref.name}": shm length ${length} bytes, expected ${want} (shape [${ref.shape.join(", ")}] x ${ref.dtype})`);
      let seg = opened.get(segment);
      if (!seg) opened.set(segment, (seg = openSegment(segment, addonPath)));
      let bytes = seg.read(offset, length);
      const C = CTORS[ref.dtype];
      if (bytes.byteOffset % C.BYTES_PER_ELEMENT !== 0) bytes = bytes.slice();
      out[ref.name] = { dtype: ref.dtype, shape: [...ref.shape], data: new C(bytes.buffer, bytes.byteOffset, length / C.BYTES_PER_ELEMENT) };
    }
  } finally {
    // close() drops our handle; views made above keep the mapping until they are collected.
    for (const seg of opened.values()) seg.close();
  }
  return out;
}

/** One `shm` TensorRef as a tensor (a view of the mapping with the addon, else a copy). */
export function resolveShmRef(ref: TensorRef, addonPath?: string): Tensor {
  return decodeTensorsShm([ref], [], addonPath)[ref.name]!;
}

// codec.decodeTensors (used for every task result) resolves `shm` refs from now on.
setShmResolver((ref) => resolveShmRef(ref));
