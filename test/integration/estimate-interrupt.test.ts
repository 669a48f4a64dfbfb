// `memlane estimate --calibrate` interrupted while a probe's `memlane compare` runs (a child
// process of its own): a SIGINT to the CLI's pid alone, as a supervisor or `kill -INT` sends
// it (a terminal's Ctrl-C reaches the whole process group), or its stderr reader gone (EPIPE),
// must stop that compare and its workers too, leave nothing in TMPDIR (the probes' ONNX files
// and runs) and cache nothing.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROBES, writeProbes } from "../../src/estimate/probe-models.ts";
import { type Cli, cmdline, expectNoneLeft, startCli, taggedPids } from "./pipeline-helpers.ts";

const root = mkdtempSync(path.join(os.tmpdir(), "memlane-estimate-int-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** `memlane estimate --calibrate` with a TMPDIR and a cache of its own, once a probe's compare runs (and, with `workers`, a worker of it). */
async function calibrating(label: string, workers: boolean): Promise<{ cli: Cli; tmp: string; cache: string }> {
  const tmp = path.join(root, `tmp-${label}`);
  const cache = path.join(root, `cache-${label}`);
  mkdirSync(tmp);
  const model = writeProbes(root, PROBES.filter((p) => p.name === "tiny")).get("tiny")!;
  const cli = startCli(["estimate", model, "--calibrate"], { TMPDIR: tmp, MEMLANE_CACHE_DIR: cache });
  const until = Date.now() + 60_000;
  for (;;) {
    const pids = taggedPids(cli.tag).filter((p) => p !== cli.child.pid);
    const compare = pids.some((p) => / compare /.test(cmdline(p)));
    if (compare && (!workers || pids.some((p) => / --name /.test(cmdline(p))))) return { cli, tmp, cache };
    if (Date.now() > until) throw new Error(`no probe compare${workers ? " with workers" : ""} within 60 s:\n${cli.stderr()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const calibrations = (cache: string): string[] => (existsSync(cache) ? readdirSync(cache).filter((f) => f.startsWith("calibration-")) : []);

describe("memlane estimate --calibrate, interrupted", () => {
  it("a SIGINT to the CLI alone stops the probe's compare and its workers and removes the probes", async () => {
    const { cli, tmp, cache } = await calibrating("sigint", true);
    expect(readdirSync(tmp).some((f) => f.startsWith("memlane-calibrate-"))).toBe(true);
    cli.child.kill("SIGINT");
    const { code } = await cli.exit;
    const ctx = `stderr:\n${cli.stderr().slice(-3000)}`;
    expect(code, ctx).toBe(130);
    // The CLI exits after its compare has stopped (and that one after its workers): nothing
    // may still run a moment later (an orphaned compare ran on for seconds, finishing its probe).
    const left = await expectNoneLeft(cli.tag, 2000);
    expect(left.map((p) => `${p} ${cmdline(p)}`), ctx).toEqual([]);
    // (tsx's shared compile cache, tsx-<uid>, is no run's)
    expect(readdirSync(tmp).filter((f) => !/^tsx-\d+$/.test(f)), ctx).toEqual([]);
    expect(calibrations(cache), ctx).toEqual([]);
  }, 120_000);

  it("its stderr closed (piped into `head`) ends it on EPIPE without leaving the probe's compare or the probes", async () => {
    const { cli, tmp, cache } = await calibrating("epipe", false);
    cli.child.stderr!.destroy(); // the reader goes away: the next progress line gets EPIPE
    const { code } = await cli.exit;
    expect(code).toBe(141);  // as SIGPIPE would end it (src/workers/cleanup.ts)
    const left = await expectNoneLeft(cli.tag, 5000);
    expect(left.map((p) => `${p} ${cmdline(p)}`)).toEqual([]);
    // The probes and their runs are gone. (Not checked: ONNX Runtime's telemetry file `.ses`,
    // which the SIGKILLed compare's runtime can leave in TMPDIR: a process killed that way
    // cleans nothing, and the exit hook cannot wait for a gentler stop.)
    expect(readdirSync(tmp).filter((f) => f.startsWith("memlane-"))).toEqual([]);
    expect(calibrations(cache)).toEqual([]);
  }, 120_000);
});
