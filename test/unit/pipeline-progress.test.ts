import { describe, expect, it } from "vitest";
import { createProgress } from "../../src/pipeline/progress.ts";
import type { Io } from "../../src/cli/io.ts";
import { accuracy, argmaxRows, maxAbsDiff } from "../../src/pipeline/metrics.ts";
import { newRunId, writeAtomic } from "../../src/pipeline/run-dir.ts";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

function fakeIo(isTTY: boolean) {
  const lines: string[] = [];
  const redraws: string[] = [];
  const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l), isTTY, redraw: (l) => redraws.push(l), columns: 100 };
  return { io, lines, redraws };
}

describe("progress", () => {
  it("draws a bar per running stage on a TTY", () => {
    const { io, lines, redraws } = fakeIo(true);
    const p = createProgress(io);
    p.stageStart("train", "train");
    p.update("train", 3, 12, "epoch 3/12");
    p.update("train", 3, 12, "epoch 3/12"); // unchanged: not redrawn
    p.stageEnd("train", "done");
    expect(redraws.some((r) => /train \[#{5}-{15}\] epoch 3\/12/.test(r))).toBe(true);
    expect(redraws.filter((r) => r.includes("epoch 3/12"))).toHaveLength(1);
    expect(lines[0]).toBe("▶ train (train)");
    expect(lines[1]).toMatch(/^✓ train \d+ ms — done$/);
  });

  it("prints plain lines and no bars when stdout is not a TTY", () => {
    const { io, lines, redraws } = fakeIo(false);
    const p = createProgress(io);
    p.stageStart("bench:python-ort", "benchmark python-ort");
    p.update("bench:python-ort", 1, 5, "import done");
    p.update("bench:python-ort", 1, 5, "import done");
    p.stageEnd("bench:python-ort", "", true);
    expect(redraws).toEqual([]);
    expect(lines).toEqual(["▶ bench:python-ort (benchmark python-ort)", "  bench:python-ort: import done", expect.stringMatching(/^✗ bench:python-ort/)]);
  });
});

describe("numerics and run directories", () => {
  it("accuracy is argmax against labels; max abs diff over every element", () => {
    const out = new Float32Array([0.1, 0.9, 0.8, 0.2, 0.3, 0.7]);
    expect([...argmaxRows(out, 3)]).toEqual([1, 0, 1]);
    expect(accuracy(out, new BigInt64Array([1n, 0n, 0n]))).toBeCloseTo(2 / 3);
    expect(maxAbsDiff(out, new Float32Array([0.1, 0.9, 0.8, 0.2, 0.3, 0.2]))).toBeCloseTo(0.5);
    expect(() => maxAbsDiff(out, new Float32Array(2))).toThrow(/differ in length/);
  });

  it("run ids sort by time and differ; artifacts are written atomically", async () => {
    const a = newRunId(new Date(Date.UTC(2026, 0, 2, 3, 4, 5)));
    expect(a).toMatch(/^20260102-030405-[0-9a-f]{6}$/);
    expect(newRunId()).not.toBe(newRunId());
    const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-art-"));
    const f = await writeAtomic(path.join(dir, "x.json"), "{}");
    expect(readFileSync(f, "utf8")).toBe("{}");
    expect(readdirSync(dir)).toEqual(["x.json"]); // no temp file left
    rmSync(dir, { recursive: true });
  });
});
