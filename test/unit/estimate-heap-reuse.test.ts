// What of ORT's arena lands in the blocks its load left held (src/estimate/ort-heap-reuse.ts):
// the best-fit rule over the probe's pieces, and the replay's resident bytes less what they serve.
import { describe, expect, it } from "vitest";
import { replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { arenaResidentBeyondHeld, servedFromHeld } from "../../src/estimate/ort-heap-reuse.ts";
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
    expect(arenaResidentBeyondHeld(replay, null)).toEqual({ firstRequestBytes: replay.firstRequestBytes, residentBytes: replay.residentBytes });
  });

  it("leaves out the written pages of the regions and tables the pieces serve, at the first request and after the run", () => {
    expect(replay.regions.map((b) => b / MIB)).toEqual([8, 8, 16]);
    expect(replay.firstRequestRegionsResident.map((b) => b / MIB)).toEqual([8, 8]);
    // One 8 MiB and one 1 MiB piece: region 0 -> the 8; its table (0.25) -> the 1; region 1 ->
    // none; its table -> the 0.75 left; region 2 -> none; its table (0.5) -> the 0.5 left.
    const r = arenaResidentBeyondHeld(replay, [{ bytes: 8 * MIB, count: 1 }, { bytes: MIB, count: 1 }]);
    expect(r.residentBytes / MIB).toBe(replay.residentBytes / MIB - (8 + 0.25 + 0.25 + 0.5));
    expect(r.firstRequestBytes / MIB).toBe(replay.firstRequestBytes / MIB - (8 + 0.25 + 0.25));
  });
});
