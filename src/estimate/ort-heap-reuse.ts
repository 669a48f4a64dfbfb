/**
 * What of ORT's arena lands in memory malloc already holds (docs/memory.md, "What the arena
 * takes from held memory"). The arena's regions and their handle tables are malloc'd on the
 * thread that loaded the session, whose arena keeps most of what the load freed (heldMiB,
 * ort-load.ts). glibc serves a request from a free chunk that holds it before it grows the heap
 * or maps a block (the mmap threshold only picks between those two), so a region or table that
 * fits in a held block costs no RSS: the held figure counts those pages already. The arena
 * replay (ort-arena.ts) counts every region's written pages as new, which put resnet18's steady
 * RSS 9 MiB high in python-ort: its two 4 MiB regions and all four tables fit in the blocks its
 * load left (probe: one 16 MiB, three 8 MiB, two 4 MiB, ... 32 KiB blocks), its 32 MiB regions
 * did not.
 *
 * The rule replayed: blocks in malloc's order (each region, then its table), each into the
 * smallest held piece that holds it (glibc's large bins are best fit), the piece's rest staying
 * free for later blocks; a block no piece holds costs its written pages, as the replay says.
 *
 * Blocks the process mallocs on that thread after the load and before the first request come
 * first: node-ort's eval set, which its child reads into one Buffer after model-load
 * (node-ort-process.mjs) on the main thread, where onnxruntime-node loaded. efficientnet_b1's
 * 9.2 MiB eval set took the 16 MiB block its load left (malloc's free bytes fell 8.9 MiB over
 * first-inference, which grew RSS by 10.2 MiB where the eval set and the arena had been
 * counted at 19.1).
 */
import type { ArenaReplay } from "./ort-arena.ts";
import { handleTableBytes } from "./bfc-arena.ts";
import type { FreePieces } from "./ort-load.ts";

/** Best fit of each block, in order, into the held pieces (the rest of a piece kept free): which blocks a piece took, and the pieces left. */
export function serveFromHeld(blocks: readonly number[], pieces: readonly FreePieces[]): { served: boolean[]; left: FreePieces[] } {
  const free: number[] = pieces.flatMap((p) => Array<number>(p.count).fill(p.bytes));
  const served = blocks.map((bytes) => {
    let best = -1;
    for (let i = 0; i < free.length; i++) if (free[i]! >= bytes && (best < 0 || free[i]! < free[best]!)) best = i;
    if (best < 0) return false;
    free[best]! -= bytes;
    if (free[best] === 0) free.splice(best, 1);
    return true;
  });
  const counts = new Map<number, number>();
  for (const bytes of free) counts.set(bytes, (counts.get(bytes) ?? 0) + 1);
  const left = [...counts].map(([bytes, count]) => ({ bytes, count })).sort((a, b) => b.bytes - a.bytes);
  return { served, left };
}

/** For each block, in order, whether a held piece serves it (best fit, the rest kept). */
export function servedFromHeld(blocks: readonly number[], pieces: readonly FreePieces[]): boolean[] {
  return serveFromHeld(blocks, pieces).served;
}

/** How many of the blocks' bytes held pieces take (best fit, in order). */
export function bytesServedFromHeld(blocks: readonly number[], pieces: readonly FreePieces[]): number {
  const { served } = serveFromHeld(blocks, pieces);
  return blocks.reduce((sum, bytes, i) => sum + (served[i] ? bytes : 0), 0);
}

/**
 * The replay's resident bytes after the first request and after the run, less what held pieces
 * served (those pages are in heldMiB already). Without pieces (not measured), the replay's own.
 * `before`: blocks malloc'd on the same thread ahead of the arena's, written whole; how many of
 * their bytes held pieces served (`beforeServedBytes`), which cost no RSS either. `heldLeft`: the
 * pieces no block took, for what the process mallocs after (node-ort's dead outputs); null
 * without pieces.
 */
export function arenaResidentBeyondHeld(replay: ArenaReplay, pieces: readonly FreePieces[] | null, before: readonly number[] = []): { firstRequestBytes: number; residentBytes: number; beforeServedBytes: number; heldLeft: FreePieces[] | null } {
  if (!pieces) return { firstRequestBytes: replay.firstRequestBytes, residentBytes: replay.residentBytes, beforeServedBytes: 0, heldLeft: null };
  const { served: all, left } = serveFromHeld([...before, ...replay.regions.flatMap((bytes) => [bytes, handleTableBytes(bytes)])], pieces);
  const beforeServedBytes = before.reduce((sum, bytes, k) => sum + (all[k] ? bytes : 0), 0);
  const served = all.slice(before.length);
  let firstSaved = 0;
  let allSaved = 0;
  replay.regions.forEach((bytes, i) => {
    const [region, table] = [served[2 * i]!, served[2 * i + 1]!];
    const tableBytes = handleTableBytes(bytes);
    allSaved += (region ? replay.regionsResident[i]! : 0) + (table ? tableBytes : 0);
    if (i < replay.firstRequestRegionsResident.length) firstSaved += (region ? replay.firstRequestRegionsResident[i]! : 0) + (table ? tableBytes : 0);
  });
  return { firstRequestBytes: replay.firstRequestBytes - firstSaved, residentBytes: replay.residentBytes - allSaved, beforeServedBytes, heldLeft: left };
}
