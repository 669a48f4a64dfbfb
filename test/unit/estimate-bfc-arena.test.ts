// ORT's CPU arena replayed (src/estimate/bfc-arena.ts): the rules of onnxruntime's BFCArena that
// decide which regions it takes and which of their pages are written to. Checked against ORT
// itself on real models in test/integration/ort-arena.test.ts.
import { describe, expect, it } from "vitest";
import { BfcArenaReplay } from "../../src/estimate/bfc-arena.ts";
import { evalChunks, ortPatternKey, replayOrtArena } from "../../src/estimate/ort-arena.ts";
import type { TraceEvent } from "../../src/estimate/ort-pattern.ts";

const MIB = 2 ** 20;
const regions = (a: BfcArenaReplay) => a.report().map((r) => r.bytes / MIB);
const resident = (a: BfcArenaReplay) => a.report().map((r) => r.residentBytes / MIB);

describe("the arena's regions (kNextPowerOfTwo from 1 MiB)", () => {
  it("doubles the region size until it holds the request; a region that needed no doubling doubles the next", () => {
    const a = new BfcArenaReplay();
    a.alloc(3 * MIB); // 1 → 2 → 4 MiB
    a.alloc(3 * MIB); // the first region's last MiB cannot hold it: 4 MiB again, the next will be 8
    a.alloc(5 * MIB);
    expect(regions(a)).toEqual([4, 4, 8]);
  });

  it("stops doubling the next region at max_power_of_two_extend_bytes (1 GiB)", () => {
    const a = new BfcArenaReplay();
    a.alloc(300 * MIB); // 512 MiB (doubled to hold it: the next stays 512)
    a.alloc(300 * MIB); // 512 again (no doubling needed: the next would be 1024)
    a.alloc(800 * MIB); // 1024, no doubling needed: the next would be 2048, but 1 GiB is the cap
    a.alloc(800 * MIB);
    expect(regions(a)).toEqual([512, 512, 1024, 1024]);
  });

  it("gives the whole free chunk when splitting it would leave less than the request (resnet18's 4 MiB regions)", () => {
    const a = new BfcArenaReplay();
    a.release(a.alloc(3 * MIB)); // a free 4 MiB chunk
    a.alloc(2.5 * MIB); // 4 < 2 × 2.5: not split, the chunk is taken whole
    a.alloc(0.5 * MIB); // so this one needs a region of its own (4 MiB: no doubling needed)
    expect(regions(a)).toEqual([4, 4]);
    const b = new BfcArenaReplay();
    b.release(b.alloc(3 * MIB));
    b.alloc(2 * MIB); // 4 ≥ 2 × 2: split, the other half stays free
    b.alloc(0.5 * MIB);
    expect(regions(b)).toEqual([4]);
  });

  it("takes the smallest free chunk that holds the request, and merges freed neighbours", () => {
    const a = new BfcArenaReplay({ initialRegionBytes: 8 * MIB });
    const x = a.alloc(1 * MIB);
    const y = a.alloc(1 * MIB);
    a.alloc(1 * MIB);
    a.release(x);
    a.release(y); // x and y merge into one free 2 MiB chunk
    a.alloc(2 * MIB); // fits there, not in the 5 MiB tail
    a.alloc(5 * MIB); // the tail, whole
    expect(regions(a)).toEqual([8]);
  });

  it("rounds every request up to 256 bytes", () => {
    const a = new BfcArenaReplay({ initialRegionBytes: 1024 });
    for (let i = 0; i < 4; i++) a.alloc(129);
    expect(a.report().map((r) => r.bytes)).toEqual([1024]);
    a.alloc(1);
    expect(a.report()).toHaveLength(2);
  });
});

describe("what becomes resident", () => {
  it("is the pages ever written to, not the region: a 64 MiB region for 36 MiB holds 36", () => {
    const a = new BfcArenaReplay({ initialRegionBytes: 64 * MIB });
    a.release(a.alloc(36 * MIB));
    a.release(a.alloc(10 * MIB)); // the same first pages again
    expect(regions(a)).toEqual([64]);
    expect(resident(a)).toEqual([36]);
  });

  it("after a batch's first request and its pattern: each in regions of their own when neither fits the other's", () => {
    // Three 1 MiB tensors a sample, two alive at once: at batch 8 the first request takes two
    // 8 MiB regions (the third tensor reuses the first's chunk) and writes both; the pattern
    // (two tensors: 16 MiB) is one block that neither region holds, so a third region.
    const trace: TraceEvent[] = [
      { kind: "alloc", id: 0, size: MIB }, { kind: "alloc", id: 1, size: MIB }, { kind: "free", id: 0 },
      { kind: "alloc", id: 2, size: MIB }, { kind: "free", id: 1 }, { kind: "free", id: 2 },
    ];
    const r = replayOrtArena(trace, [8]);
    expect(r.regions.map((b) => b / MIB)).toEqual([8, 8, 16]);
    // Each region's handle table (8 bytes a 256) is resident from the region's making on.
    expect(r.handleTableBytes / MIB).toBe((8 + 8 + 16) / 32);
    expect(r.firstRequestBytes / MIB).toBe(16 + (8 + 8) / 32);
    expect(r.residentBytes / MIB).toBe(16 + 16 + 1);
    expect(r.regionsResident.map((b) => b / MIB)).toEqual([8, 8, 16]);
  });

  it("holds python-ort's eval outputs until the pass ends: every chunk's at once", () => {
    // One 1 MiB tensor and a 1 MiB output a sample: at batch 1 each request's output goes back
    // and the next takes the same chunk; kept, four outputs are alive together.
    const trace: TraceEvent[] = [
      { kind: "alloc", id: 0, size: MIB }, { kind: "alloc", id: 1, size: MIB, output: true }, { kind: "free", id: 0 }, { kind: "free", id: 1 },
    ];
    const chunks = [1, 1, 1, 1];
    const dropped = replayOrtArena(trace, [1], undefined, { chunks, holdOutputs: false });
    const kept = replayOrtArena(trace, [1], undefined, { chunks, holdOutputs: true });
    expect(kept.residentBytes - dropped.residentBytes).toBeGreaterThanOrEqual(3 * MIB);
  });

  it("keys ORT's patterns on the XOR of the input dims: one input's batch sizes apart, two inputs of one shape never", () => {
    const cnn = [[-1, 3, 224, 224]];
    expect(new Set([1, 8, 64].map((b) => ortPatternKey(cnn, b))).size).toBe(3);
    const lm = [[-1, 128], [-1, 128]];
    expect([1, 8, 64].map((b) => ortPatternKey(lm, b))).toEqual([0, 0, 0]);
    const bert = [[-1, 128], [-1, 128], [-1, 128]];
    expect(new Set([1, 8].map((b) => ortPatternKey(bert, b))).size).toBe(2);
  });

  it("a batch size that finds another's pattern runs tensor by tensor beside that pattern's block, at every request", () => {
    // The trace above at batch 1 then 8 under one key: batch 8 never gets a pattern of its own,
    // so no 16 MiB block; it allocates batch 1's 2 MiB block, then its tensors one by one.
    const trace: TraceEvent[] = [
      { kind: "alloc", id: 0, size: MIB }, { kind: "alloc", id: 1, size: MIB }, { kind: "free", id: 0 },
      { kind: "alloc", id: 2, size: MIB }, { kind: "free", id: 1 }, { kind: "free", id: 2 },
    ];
    const byShape = replayOrtArena(trace, [1, 8]);
    const keyed = replayOrtArena(trace, [1, 8], () => 0);
    expect(byShape.regions.map((b) => b / MIB)).toContain(16);
    expect(keyed.regions.map((b) => b / MIB)).not.toContain(16);
    expect(keyed.residentBytes).toBeLessThan(byShape.residentBytes);
    // batch 8's tensors (two 8 MiB at once) and batch 1's 2 MiB block are all written
    expect(keyed.residentBytes / MIB).toBeGreaterThanOrEqual(16 + 2);
  });

  it("takes a tensor that does not grow with the batch from the other batch's block, not the arena, in a request of a stale pattern", () => {
    // A 16 MiB tensor of fixed size (GPT-2's position embeddings, [1, seq, hidden]) beside a
    // 1 MiB-a-sample one: at batch 8 under batch 1's key only the 8 MiB tensor comes from the
    // arena; the fixed one has its place in batch 1's block (ORT matches a block by its size).
    const trace: TraceEvent[] = [
      { kind: "alloc", id: 0, size: 16 * MIB, fixed: true }, { kind: "alloc", id: 1, size: MIB }, { kind: "free", id: 0 }, { kind: "free", id: 1 },
    ];
    const keyed = replayOrtArena(trace, [1, 8], () => 0);
    expect(keyed.regions.map((b) => b / MIB)).toEqual([16, 16, 32]);
    // Written: batch 1's tensors one by one (16 + 1 MiB, a region each) and its 17 MiB block
    // (the 32 MiB region, whole: a chunk splits only at twice the request), then batch 8's
    // 8 MiB tensor over the second region's 1 MiB. Taken from the arena beside the block as
    // well, the fixed tensor took that region and pushed the 8 MiB one onto 8 more pages (49).
    expect((keyed.residentBytes - keyed.handleTableBytes) / MIB).toBe(41);
  });

  it("runs the eval set in chunks of the largest batch, a shorter one last", () => {
    expect(evalChunks(256, 8)).toEqual(new Array(32).fill(8));
    expect(evalChunks(100, 64)).toEqual([64, 36]);
    expect(evalChunks(0, 64)).toEqual([]);
    expect(() => evalChunks(10, 0)).toThrow(/positive integer/);
    expect(() => replayOrtArena([], [0])).toThrow(/positive integers/);
  });
});

describe("the room a quantized model's load leaves in the arena (loadFreeBytes)", () => {
  // An int8 ResNet-50's PrePack took its reordered filters from the arena: regions of 2, 2, 4, 8
  // and 16 MiB, 16 MiB of them never written; its first request at batch 1 (8 MiB of dequantized
  // weight the largest) took that room, then a 32 MiB region (ORT's log: "Extended allocation by
  // 33554432 bytes").
  it("takes what fits in the room first, counting its pages as written, without a region", () => {
    const a = new BfcArenaReplay({ loadFreeBytes: 16 * MIB });
    a.release(a.alloc(6 * MIB));
    a.alloc(3 * MIB);
    expect(regions(a)).toEqual([]);
    expect(a.loadRoomResidentBytes() / MIB).toBe(6);
    const fresh = new BfcArenaReplay();
    fresh.release(fresh.alloc(6 * MIB));
    expect(regions(fresh)).toEqual([8]);
  });

  it("grows on from the load's regions: the next one is twice the largest the room fills", () => {
    const a = new BfcArenaReplay({ loadFreeBytes: 16 * MIB });
    a.alloc(12 * MIB);
    a.alloc(8 * MIB); // the room went whole to 12 MiB (less than twice it): a region, 32 MiB (the load's last was 16)
    expect(regions(a)).toEqual([32]);
    const small = new BfcArenaReplay({ loadFreeBytes: 0.9 * MIB }); // less than the first region: no growth
    small.alloc(2 * MIB);
    expect(regions(small)).toEqual([2]);
  });

  it("counts in the replay's resident bytes, its region and table not (they are the load's)", () => {
    // One 1 MiB tensor a sample at batch 4: in a 6 MiB room, no region and no table.
    const trace: TraceEvent[] = [{ kind: "alloc", id: 0, size: MIB }, { kind: "free", id: 0 }];
    const withRoom = replayOrtArena(trace, [4], undefined, undefined, 6 * MIB);
    expect(withRoom.regions).toEqual([]);
    expect(withRoom.handleTableBytes).toBe(0);
    expect(withRoom.firstRequestBytes / MIB).toBe(4);
    expect(withRoom.residentBytes / MIB).toBe(4);
    const without = replayOrtArena(trace, [4]);
    expect(without.regions.map((b) => b / MIB)).toEqual([4]);
    expect(without.residentBytes / MIB).toBe(4 + 4 / 32);
  });
});
