// The consistency of "where the RAM goes" (docs/memory.md): a process that maps a known file
// and allocates known anonymous memory (test/fixtures/alloc) is read through /proc/<pid>/smaps,
// classified, and its kinds must (a) show the file as mapped weights and the allocation as
// anonymous memory, each within 2 % of its size, and (b) add up to the same moment's
// smaps_rollup within 1 %.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupByKind, totalOf, type KindTotals } from "../../src/memory/breakdown.ts";
import { readSmapsRollup } from "../../src/memory/proc.ts";
import { readSmaps } from "../../src/memory/smaps.ts";
import { AllocProcess } from "../fixtures/alloc/alloc-process.ts";

const MiB = 1024; // KiB

async function kindsOf(pid: number): Promise<KindTotals[]> {
  const s = await readSmaps(pid);
  if (s === null) throw new Error(`pid ${pid} is gone`);
  return groupByKind(s);
}
const kib = (kinds: KindTotals[], kind: string, key: "rssKiB" | "ussKiB" = "rssKiB") => kinds.find((k) => k.kind === kind)?.[key] ?? 0;

describe("smaps breakdown of a process with a mapped 24 MiB model file and 32 MiB of anonymous memory", () => {
  let p: AllocProcess;
  const dir = mkdtempSync(join(tmpdir(), "memlane-smaps-fixture-"));
  const model = join(dir, "weights.onnx");

  beforeAll(async () => {
    const bytes = Buffer.alloc(24 << 20);
    for (let i = 0; i < bytes.length; i += 4096) bytes[i] = i % 251; // not all zeros
    writeFileSync(model, bytes);
    p = await AllocProcess.start();
  }, 60_000);
  afterAll(() => {
    p?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("attributes the file to model-files and the allocation to anonymous, and sums to the rollup within 1 %", async () => {
    const before = await kindsOf(p.pid);
    await p.send(`map ${model}`);
    await p.send("alloc 32");
    const after = await kindsOf(p.pid);
    const rollup = (await readSmapsRollup(p.pid))!; // the fixture is idle: the same moment as the smaps read

    expect(kib(before, "model-files")).toBe(0);
    const weights = after.find((k) => k.kind === "model-files")!;
    expect(weights.files.map((f) => f.path)).toEqual([model]);
    expect(Math.abs(weights.rssKiB - 24 * MiB)).toBeLessThanOrEqual(0.02 * 24 * MiB);
    const anonGrew = kib(after, "anonymous") - kib(before, "anonymous");
    expect(Math.abs(anonGrew - 32 * MiB)).toBeLessThanOrEqual(0.02 * 32 * MiB);
    expect(Math.abs(kib(after, "anonymous", "ussKiB") - kib(before, "anonymous", "ussKiB") - 32 * MiB)).toBeLessThanOrEqual(0.02 * 32 * MiB);

    const total = totalOf(after);
    for (const [got, want] of [[total.rssKiB, rollup.rssKiB], [total.pssKiB, rollup.pssKiB], [total.ussKiB, rollup.ussKiB]] as const)
      expect(Math.abs(got - want)).toBeLessThanOrEqual(0.01 * want);
  });
});
