import { describe, expect, it } from "vitest";
import { activeRuns, ConcurrentRuns, WATCH_INTERVAL_MS } from "../../src/pipeline/concurrent-runs.ts";

describe("concurrent runs", () => {
  it("a run sees the runs active at its start and those started during it; nothing is written anywhere", async () => {
    const first = new ConcurrentRuns("20260101-000000-aaaaaa");
    try {
      await new Promise((r) => setTimeout(r, 50));
      expect(activeRuns()).toEqual(expect.arrayContaining([{ pid: process.pid, runId: "20260101-000000-aaaaaa" }]));
      const second = new ConcurrentRuns("20260101-000000-bbbbbb");
      expect(second.notes().join("\n")).toMatch(new RegExp(`another memlane run was active when this run started: (.*, )?pid ${process.pid} \\(run 20260101-000000-aaaaaa\\)`));
      // Other memlane runs may be active on the machine (test files run side by side): only
      // notes about this test's own runs count.
      const ours = (notes: string[]) => notes.filter((n) => n.includes("run 20260101-000000-"));
      expect(ours(first.notes())).toEqual([]);
      await new Promise((r) => setTimeout(r, WATCH_INTERVAL_MS * 2.5));
      expect(first.notes().join("\n")).toMatch(/another memlane run started during this run: (.*, )?pid \d+ \(run 20260101-000000-bbbbbb\) [\d.]+ s in/);
      second.close();
      await new Promise((r) => setTimeout(r, 50));
      expect(activeRuns().some((r) => r.runId === "20260101-000000-bbbbbb")).toBe(false);
    } finally {
      first.close();
    }
  });

  it("parses /proc/net/unix lines with Node's NUL padding", async () => {
    const { writeFileSync, mkdtempSync, rmSync } = await import("node:fs");
    const dir = mkdtempSync("/tmp/memlane-cr-");
    try {
      writeFileSync(`${dir}/unix`, [
        "Num       RefCount Protocol Flags    Type St Inode Path",
        "0000000000000000: 00000002 00000000 00010000 0001 01 68623 @memlane-run.123.20260101-000000-cccccc@@@@@@@@",
        "0000000000000000: 00000002 00000000 00010000 0001 01 68624 @other-thing",
        "0000000000000000: 00000002 00000000 00010000 0001 01 68625 /run/x.sock",
      ].join("\n"));
      expect(activeRuns(`${dir}/unix`)).toEqual([{ pid: 123, runId: "20260101-000000-cccccc" }]);
      expect(activeRuns(`${dir}/missing`)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
