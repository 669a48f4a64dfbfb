// What of ORT's arena lands in the blocks its load left held (src/estimate/ort-heap-reuse.ts):
// the best-fit rule over the probe's pieces, and the replay's resident bytes less what they serve.
import { describe, expect, it } from "vitest";
import { replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { arenaResidentBeyondHeld, bytesServedFromHeld, serveFromHeld, servedFromHeld } from "../../src/estimate/ort-heap-reuse.ts";
import type { TraceEvent } from "../../src/estimate/ort-pattern.ts";

const MIB = 2 ** 20;
const KIB = 1024;

describe("servedFromHeld", () => {
  it("puts each block in the smallest piece that holds it, so a later larger block still finds its own", () => {
    // First fit into the 8 MiB piece would leave the 8 MiB block nowhere.
    expect(servedFromHeld([4 * MIB, 8 * MIB], [{ bytes: 8 * MIB, count: 1 }, { bytes: 4 * MIB, count: 1 }])).toEqual([true, true]);
  });

  it("keeps a piece's rest for later blocks, and serves nothing that no piece holds", () => {
    const pieces = [{ bytes: 8 * MIB, count: 1 }, { bytes: 4 * MIB, count: 1 }];
    // 4 MiB -> the 4 MiB piece; 128 KiB -> the 8 (7.875 left); 4 MiB -> the 7.875 (3.875 left);
    // 128 KiB -> the 3.875; 32 MiB -> none; 1 MiB -> the 3.75.
    const blocks = [4 * MIB, 128 * KIB, 4 * MIB, 128 * KIB, 32 * MIB, MIB];
    expect(servedFromHeld(blocks, pieces)).toEqual([true, true, true, true, false, true]);
    expect(servedFromHeld(blocks, [])).toEqual(blocks.map(() => false));
    // Counts are blocks, not a total: two 2 MiB pieces do not hold a 4 MiB block.
    expect(servedFromHeld([4 * MIB, 2 * MIB, 2 * MIB, MIB], [{ bytes: 2 * MIB, count: 2 }])).toEqual([false, true, true, false]);
  });

  it("says which pieces are left, largest first, and how many bytes the pieces took", () => {
    const pieces = [{ bytes: 8 * MIB, count: 2 }, { bytes: 2 * MIB, count: 3 }];
    // 3 MiB -> an 8 (5 left); 3 -> the 5 (2 left); 3 -> the other 8 (5 left); 16 -> none.
    const { served, left } = serveFromHeld([3 * MIB, 3 * MIB, 3 * MIB, 16 * MIB], pieces);
    expect(served).toEqual([true, true, true, false]);
    expect(left).toEqual([{ bytes: 5 * MIB, count: 1 }, { bytes: 2 * MIB, count: 4 }]);
    expect(bytesServedFromHeld([3 * MIB, 3 * MIB, 3 * MIB, 16 * MIB], pieces)).toBe(9 * MIB);
    expect(serveFromHeld([], pieces).left).toEqual(pieces);
  });
});

describe("arenaResidentBeyondHeld", () => {
  // Three 1 MiB tensors a sample, two alive at once, at batch 8: regions of 8, 8 and 16 MiB
  // (estimate-bfc-arena.test.ts), all written; tables of 1/32 each.
  const trace: TraceEvent[] = [
    { kind: "alloc", id: 0, size: MIB }, { kind: "alloc", id: 1, size: MIB }, { kind: "free", id: 0 },
    { kind: "alloc", id: 2, size: MIB }, { kind: "free", id: 1 }, { kind: "free", id: 2 },
  ];
  const replay = replayOrtArena(trace, [8]);

  it("is the replay's own without pieces", () => {
    expect(arenaResidentBeyondHeld(replay, null)).toEqual({ firstRequestBytes: replay.firstRequestBytes, residentBytes: replay.residentBytes, beforeServedBytes: 0, heldLeft: null });
    expect(arenaResidentBeyondHeld(replay, null, [9 * MIB]).beforeServedBytes).toBe(0);
  });

  it("leaves out the written pages of the regions and tables the pieces serve, at the first request and after the run", () => {
    expect(replay.regions.map((b) => b / MIB)).toEqual([8, 8, 16]);
    expect(replay.firstRequestRegionsResident.map((b) => b / MIB)).toEqual([8, 8]);
    // One 8 MiB and one 1 MiB piece: region 0 -> the 8; its table (0.25) -> the 1; region 1 ->
    // none; its table -> the 0.75 left; region 2 -> none; its table (0.5) -> the 0.5 left.
    const r = arenaResidentBeyondHeld(replay, [{ bytes: 8 * MIB, count: 1 }, { bytes: MIB, count: 1 }]);
    expect(r.residentBytes / MIB).toBe(replay.residentBytes / MIB - (8 + 0.25 + 0.25 + 0.5));
    expect(r.firstRequestBytes / MIB).toBe(replay.firstRequestBytes / MIB - (8 + 0.25 + 0.25));
    // What the pieces have left for later blocks: 1 - 0.25 - 0.25 - 0.5 = 0 of the 1 MiB piece.
    expect(r.heldLeft).toEqual([]);
    // One 32 MiB piece: regions 0 and 1 and the three tables (17 MiB); region 2 (16) no longer fits.
    expect(arenaResidentBeyondHeld(replay, [{ bytes: 32 * MIB, count: 1 }]).heldLeft).toEqual([{ bytes: 15 * MIB, count: 1 }]);
  });

  it("serves the blocks malloc'd before the arena's first (node-ort's eval set), which then takes the piece the arena would have had", () => {
    const pieces = [{ bytes: 16 * MIB, count: 1 }, { bytes: MIB, count: 1 }];
    const alone = arenaResidentBeyondHeld(replay, pieces);
    // Alone, regions 0 and 1 (8 MiB each) share the 16 MiB piece and the three tables the 1 MiB.
    // efficientnet_b1's case: a 9.2 MiB eval set takes the 16 MiB piece first; neither 8 MiB
    // region fits in what is left (6.8 and 1), the tables still do.
    const r = arenaResidentBeyondHeld(replay, pieces, [9.2 * MIB]);
    expect(r.beforeServedBytes).toBe(9.2 * MIB);
    expect(alone.residentBytes).toBe(replay.residentBytes - (8 + 8 + 0.25 + 0.25 + 0.5) * MIB);
    expect(r.residentBytes).toBe(replay.residentBytes - (0.25 + 0.25 + 0.5) * MIB);
    // A block no piece holds is not served, and leaves the pieces to the arena.
    const big = arenaResidentBeyondHeld(replay, pieces, [20 * MIB]);
    expect(big.beforeServedBytes).toBe(0);
    expect(big.residentBytes).toBe(alone.residentBytes);
  });
});
