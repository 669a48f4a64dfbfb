/**
 * Failures leave no trace outside what they report: `memlane compare` on a directory is a
 * usage error (exit 2) and on a file that does not decode a failure (exit 1), and neither
 * leaves a run directory, empty or not, nor anything in its TMPDIR. A command whose stdout's
 * reader has gone (`memlane compile ... | head -0`) ends as SIGPIPE would end it (exit 141),
 * without a stack trace.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROBES, writeProbes } from "../../src/estimate/probe-models.ts";
import { readPlan } from "../../src/compiler/read.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-leftovers-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function compare(model: string, name: string): Promise<{ code: number | null; err: string; runs: string[]; tmp: string[] }> {
  // The output folder does not exist yet: a failure that wrote nothing does not leave it either.
  const out = path.join(dir, `runs-${name}`);
  const tmp = path.join(dir, `tmp-${name}`);
  mkdirSync(tmp);
  const cli = startCli(["compare", model, "--runtimes", "node-ort", "--out", out, "-q"], { TMPDIR: tmp });
  const { code } = await cli.exit;
  expect(await expectNoneLeft(cli.tag)).toEqual([]);
  return { code, err: cli.stderr(), runs: existsSync(out) ? ["(the output folder)", ...readdirSync(out)] : [], tmp: readdirSync(tmp).filter((f) => !/^tsx-\d+$/.test(f)) };
}

describe("failed commands leave nothing behind", () => {
  it("compare on a directory: usage error, no run directory", async () => {
    const r = await compare(dir, "dir");
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/<model\.onnx>: expected an ONNX file \(not a directory\)/);
    expect(r.runs).toEqual([]);
    expect(r.tmp).toEqual([]);
  });

  it("compare on a file that does not decode: exit 1, no run directory", async () => {
    const bad = path.join(dir, "garbage.onnx");
    writeFileSync(bad, Buffer.from("this is not protobuf \x00\xff\xfe".repeat(40), "latin1"));
    const r = await compare(bad, "garbage");
    expect(r.code, r.err).toBe(1);
    expect(r.err).toMatch(/garbage\.onnx/);
    expect(r.runs).toEqual([]);
    expect(r.tmp).toEqual([]);
  });

  it("compile with its stdout closed before it prints: exit 141, no stack trace, the plan whole", async () => {
    const model = writeProbes(dir, PROBES.filter((p) => p.name === "tiny")).get("tiny")!;
    const plan = path.join(dir, "epipe.mlplan");
    const cli = startCli(["compile", model, "-o", plan]);
    cli.child.stdout!.destroy();  // the reader is gone before the first line
    const { code } = await cli.exit;
    const err = cli.stderr();
    expect(code, err).toBe(141);
    expect(err).not.toMatch(/Unhandled|EPIPE\n\s+at |node:events/);
    expect(readPlan(plan).header.ops.length).toBe(2);  // parses: checksum and all (MatMul, Relu)
  });
});
