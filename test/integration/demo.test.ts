// The main job as `npm run demo` runs it: digits trained to ≥ 0.95 held-out accuracy,
// deployed on every runtime, checkpoint loading compared, the confusion matrix computed.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { expectNoneLeft, ROOT, startCli } from "./pipeline-helpers.ts";

const out = mkdtempSync(path.join(os.tmpdir(), "memlane-demo-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("demo: pipelines/digits.ts", () => {
  it("trains to >= 0.95, deploys on every runtime and prints the table", { timeout: 300_000 }, async () => {
    const cli = startCli(["run", "pipelines/digits.ts", "--out", out]);
    const { code } = await cli.exit;
    expect(code, `stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`).toBe(0);
    expect(await expectNoneLeft(cli.tag)).toEqual([]);
    const dir = path.join(out, readdirSync(out)[0]!);
    const r = JSON.parse(readFileSync(path.join(dir, "report.json"), "utf8")) as Report;
    expect(r.training!.accuracy).toBeGreaterThanOrEqual(0.95);
    const names = r.runtimes.map((x) => x.name);
    expect(names).toEqual(expect.arrayContaining(["python-torch", "python-ort", "node-ort"]));
    const nativeBuilt = existsSync(path.join(ROOT, "native/build/runtime/memlane-rt")) || existsSync(path.join(ROOT, "native/build/memlane-rt"));
    if (nativeBuilt) expect(names).toContain("native");
    else expect(cli.stdout()).toMatch(/native: unavailable/);
    for (const rt of r.runtimes) expect(rt.accuracy!).toBeGreaterThanOrEqual(0.95);
    expect(r.checkpointLoad.map((c) => c.method).sort()).toEqual(["safetensors", "torch.load", "torch.load-mmap"]);
    expect(cli.stdout()).toMatch(/confusion matrix/);
    const cm = JSON.parse(readFileSync(path.join(dir, "confusion-matrix.json"), "utf8")) as { matrix: number[][] };
    expect(cm.matrix).toHaveLength(10);
  });
});
