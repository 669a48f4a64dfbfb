/**
 * A replay of ONNX Runtime's CPU arena (BFCArena, onnxruntime/core/framework/bfc_arena.cc) that
 * says which of its bytes become resident (docs/memory.md, "ORT's activations: its arena
 * replayed"). The arena mallocs regions and never gives them back (it does not shrink by
 * default); malloc maps a large region without touching it, so a region costs RSS only for
 * the pages its chunks were ever written to. Measured on resnet18 (python-ort 1.32, one
 * thread, batch 1 then 8): the arena took 4 + 4 + 32 + 32 MiB of regions while RSS grew 55.
 *
 * The rules replayed, from ORT's source:
 * - requests round up to 256 bytes;
 * - a request takes the smallest free chunk that holds it (size bins are ordered by size, then
 *   address), split when that chunk is at least twice the request or wastes at least
 *   `maxDeadBytesPerChunk` (128 MiB); the rest stays a free chunk;
 * - no free chunk holds it: a new region (kNextPowerOfTwo): the region size starts at 1 MiB and
 *   doubles until it holds the request; a region that needed no doubling doubles the next one,
 *   up to `max_power_of_two_extend_bytes` (1 GiB), where the next one is held;
 * - a freed chunk merges with free neighbours in its region;
 * - each region comes with a table of chunk handles, one 8-byte `ChunkHandle` (size_t) for every
 *   256 bytes of the region, malloc'd and filled (kInvalidChunkHandle) when the region is made:
 *   1/32 of every region is resident beside it, untouched pages or not. efficientnet_b0 at
 *   batches 1,64 (224 px) takes 2336 MiB of regions, whose tables are 73 MiB: the python-ort
 *   steady RSS the estimate lacked (-3.8 %) before they were counted.
 *
 * The arena is not always empty when the first request comes: a kernel's PrePack takes its
 * packed weights from it while the session loads (a QLinearConv's reordered int8 filters), so
 * a quantized model's load leaves regions whose tails were never written (an int8 ResNet-50:
 * regions of 2, 2, 4, 8 and 16 MiB, about 16 MiB of them free; the load probe's untouchedMiB).
 * `loadFreeBytes` replays that room as one free chunk of a region the load made: the first
 * requests' tensors land there, and its pages count as they are written; its region and
 * handle table are the load's (in its probe's in-use bytes), not the replay's.
 */

/** ORT's kMinAllocationSize: every chunk is a multiple of it. */
export const BFC_MIN_ALLOCATION = 256;
/** ORT's default initial_chunk_size_bytes (OrtArenaCfg -1). */
export const BFC_INITIAL_REGION = 1 << 20;
/** ORT's default max_power_of_two_extend_bytes: the next region stops doubling there. */
export const BFC_MAX_POWER_OF_TWO_EXTEND = 1 << 30;
/** sizeof(ChunkHandle): a region's handle table holds one for every BFC_MIN_ALLOCATION bytes. */
export const BFC_HANDLE_BYTES = 8;
/** ORT's default max_dead_bytes_per_chunk. */
export const BFC_MAX_DEAD_BYTES = 128 << 20;
const PAGE = 4096;

/** A piece of a region, free or handed out; what alloc returns and release takes. */
export interface ArenaChunk {
  region: Region;
  /** Offset in its region. */
  offset: number;
  size: number;
  inUse: boolean;
  prev: ArenaChunk | null;
  next: ArenaChunk | null;
}

interface Region {
  /**
   * Its address, for the bins' tie-break between free chunks of one size: glibc maps each new
   * large region below the previous one, so a later region sorts first.
   */
  address: number;
  size: number;
  /** One flag per page: ever written to. */
  touched: Uint8Array;
}

export interface RegionReport {
  bytes: number;
  /** Bytes of its pages ever written to (what it costs in RSS). */
  residentBytes: number;
  /** Its table of chunk handles, written whole when the region is made (resident too). */
  handleTableBytes: number;
}

export class BfcArenaReplay {
  private readonly regions: Region[] = [];
  private readonly free = new Set<ArenaChunk>();
  private nextRegionBytes: number;
  /** The free room the session's load left in its regions (the header's last paragraph); null: none. */
  private readonly loadRegion: Region | null = null;

  /**
   * `sameAsRequested`: ORT's other extend strategy (kSameAsRequested), each region the size it
   * is asked for, which test/fixtures/ort_pattern_size.py runs ORT with so that its log names
   * every block a request takes.
   */
  constructor(private readonly opts: { initialRegionBytes?: number; maxDeadBytesPerChunk?: number; loadFreeBytes?: number; sameAsRequested?: boolean } = {}) {
    this.nextRegionBytes = roundUp(opts.initialRegionBytes ?? BFC_INITIAL_REGION);
    const room = Math.floor((opts.loadFreeBytes ?? 0) / BFC_MIN_ALLOCATION) * BFC_MIN_ALLOCATION;
    if (room > 0) {
      // Mapped before any region of the replay's (glibc maps each new one lower): it sorts last.
      this.loadRegion = { address: 1, size: room, touched: new Uint8Array(Math.ceil(room / PAGE)) };
      this.free.add({ region: this.loadRegion, offset: 0, size: room, inUse: false, prev: null, next: null });
      // The load's regions doubled up to the one its room is mostly in; the next one doubles
      // again (the room's largest power of two stands in for that region: its size is not read).
      let last = this.nextRegionBytes;
      while (last * 2 <= room) last *= 2;
      this.nextRegionBytes = room >= this.nextRegionBytes ? Math.min(last * 2, BFC_MAX_POWER_OF_TWO_EXTEND) : this.nextRegionBytes;
    }
  }

  /** Takes `bytes` from the arena, all of them written to (a kernel writes its whole output); the chunk, to release. */
  alloc(bytes: number): ArenaChunk {
    if (!(bytes > 0) || !Number.isFinite(bytes)) throw new Error(`BfcArenaReplay.alloc: bytes must be a positive number, got ${bytes}`);
    const rounded = roundUp(bytes);
    const chunk = this.bestFit(rounded) ?? (this.extend(rounded), this.bestFit(rounded)!);
    this.free.delete(chunk);
    const maxDead = this.opts.maxDeadBytesPerChunk ?? BFC_MAX_DEAD_BYTES;
    if (chunk.size >= rounded * 2 || chunk.size - rounded >= maxDead) this.split(chunk, rounded);
    chunk.inUse = true;
    touch(chunk.region, chunk.offset, bytes);
    return chunk;
  }

  release(chunk: ArenaChunk): void {
    if (!chunk.inUse) throw new Error("BfcArenaReplay.release: chunk is not in use (freed twice?)");
    chunk.inUse = false;
    let c = chunk;
    if (c.next && !c.next.inUse) this.merge(c, c.next);
    if (c.prev && !c.prev.inUse) {
      const p = c.prev;
      this.merge(p, c);
      c = p;
    }
    this.free.add(c);
  }

  /** Bytes of the load's free room written since (loadFreeBytes): pages the load's RSS lacked. */
  loadRoomResidentBytes(): number {
    return this.loadRegion ? this.loadRegion.touched.reduce((s, t) => s + t, 0) * PAGE : 0;
  }

  /** The regions the replay made, in order (not the load's room). */
  report(): RegionReport[] {
    return this.regions.map((r) => ({
      bytes: r.size,
      residentBytes: r.touched.reduce((s, t) => s + t, 0) * PAGE,
      handleTableBytes: handleTableBytes(r.size),
    }));
  }

  /** The smallest free chunk that holds `rounded` bytes, the lowest address among equals. */
  private bestFit(rounded: number): ArenaChunk | null {
    let best: ArenaChunk | null = null;
    for (const c of this.free) {
      if (c.size < rounded) continue;
      if (!best || c.size < best.size || (c.size === best.size && address(c) < address(best))) best = c;
    }
    return best;
  }

  private extend(rounded: number): void {
    if (this.opts.sameAsRequested) return this.addRegion(rounded);
    let grew = false;
    while (rounded > this.nextRegionBytes) {
      this.nextRegionBytes *= 2;
      grew = true;
    }
    const size = this.nextRegionBytes;
    if (!grew) this.nextRegionBytes = this.nextRegionBytes < BFC_MAX_POWER_OF_TWO_EXTEND / 2 ? this.nextRegionBytes * 2 : BFC_MAX_POWER_OF_TWO_EXTEND;
    this.addRegion(size);
  }

  private addRegion(size: number): void {
    const region: Region = { address: -this.regions.length, size, touched: new Uint8Array(Math.ceil(size / PAGE)) };
    this.regions.push(region);
    this.free.add({ region, offset: 0, size, inUse: false, prev: null, next: null });
  }

  private split(c: ArenaChunk, bytes: number): void {
    const rest: ArenaChunk = { region: c.region, offset: c.offset + bytes, size: c.size - bytes, inUse: false, prev: c, next: c.next };
    if (c.next) c.next.prev = rest;
    c.next = rest;
    c.size = bytes;
    this.free.add(rest);
  }

  /** Merges b (free, right after a) into a. */
  private merge(a: ArenaChunk, b: ArenaChunk): void {
    this.free.delete(a);
    this.free.delete(b);
    a.size += b.size;
    a.next = b.next;
    if (b.next) b.next.prev = a;
  }
}

/** The bytes of a region's table of chunk handles (malloc'd right after the region, all written). */
export const handleTableBytes = (regionBytes: number): number => Math.ceil(regionBytes / BFC_MIN_ALLOCATION) * BFC_HANDLE_BYTES;

const roundUp = (bytes: number) => Math.ceil(bytes / BFC_MIN_ALLOCATION) * BFC_MIN_ALLOCATION;
/** Regions sort by their address (a later one lower), chunks by their offset within. */
const address = (c: ArenaChunk) => c.region.address * 2 ** 40 + c.offset;

function touch(r: Region, offset: number, bytes: number): void {
  const end = Math.ceil((offset + bytes) / PAGE);
  for (let p = Math.floor(offset / PAGE); p < end; p++) r.touched[p] = 1;
}
