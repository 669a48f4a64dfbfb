/**
 * One fault trial: a `memlane run` in its own TMPDIR and output directory, its processes
 * found through a tag in their environment, and the checks every trial ends with: no
 * process left, nothing left in TMPDIR or /dev/shm, the exit code documented for the
 * fault, and a report that is complete and valid or marked failed.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { cmdline, expectNoneLeft, startCli, taggedPids, type Cli } from "../integration/pipeline-helpers.ts";
import type { Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";

export const TINY = "test/fault/fixtures/tiny.ts";

export interface Trial {
  cli: Cli;
  tmp: string;
  out: string;
}

/** Starts `memlane run <pipeline>` with a private TMPDIR and output directory. */
export function startTrial(pipeline: string, env: Record<string, string> = {}, args: string[] = []): Trial {
  const root = mkdtempSync(path.join(os.tmpdir(), "memlane-fault-"));
  const tmp = path.join(root, "tmp");
  const out = path.join(root, "runs");
  // The CLI's TMPDIR is this private folder: whatever the run leaves there is found below.
  mkdirSync(tmp);
  const cli = startCli(["run", pipeline, "--out", out, ...args], { TMPDIR: tmp, ...env });
  return { cli, tmp, out };
}

/** A live worker of the trial: its pid and the name it was started with (stage or runtime). */
export interface WorkerProc {
  pid: number;
  name: string;
}

/**
 * The trial's workers now: Python workers and memlane-rt by their `--name`, the python
 * stage's pythonia interpreter as "python-bridge"; chromium and the CLI itself excluded.
 */
export function workers(trial: Trial): WorkerProc[] {
  const out: WorkerProc[] = [];
  for (const pid of taggedPids(trial.cli.tag)) {
    if (pid === trial.cli.child.pid) continue;
    const cmd = cmdline(pid);
    if (/chrom/i.test(cmd)) continue;
    const named = / --name (\S+)/.exec(cmd);
    if (named) out.push({ pid, name: named[1]! });
    else if (/interface\.py/.test(cmd)) out.push({ pid, name: "python-bridge" });
  }
  return out;
}

export const isAlive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
};

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The run directories the trial wrote (none when a failure left nothing). */
export function runDirs(trial: Trial): string[] {
  return existsSync(trial.out) ? readdirSync(trial.out).map((d) => path.join(trial.out, d)) : [];
}

/** The report of the trial's run, or null when it wrote none. */
export function reportOf(trial: Trial): Report | null {
  const dirs = runDirs(trial);
  expect(dirs.length, `run directories: ${dirs.join(", ")}`).toBeLessThanOrEqual(1);
  const file = dirs[0] && path.join(dirs[0], "report.json");
  return file && existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Report) : null;
}

/** What every trial must leave: no process, no file outside runs/<runId>/, no empty run directory. */
export async function expectClean(trial: Trial, label: string): Promise<void> {
  const ctx = `${label}\nstdout:\n${trial.cli.stdout().slice(-3000)}\nstderr:\n${trial.cli.stderr().slice(-3000)}`;
  const left = await expectNoneLeft(trial.cli.tag, 8000);
  expect(left.map((p) => `${p} ${cmdline(p)}`), `processes left: ${ctx}`).toEqual([]);
  // tsx's compile cache (tsx-<uid>) is shared by every tsx process and reused: not the run's.
  const tmpLeft = readdirSync(trial.tmp).filter((f) => !/^tsx-\d+$/.test(f));
  expect(tmpLeft, `left in TMPDIR: ${ctx}`).toEqual([]);
  const pid = trial.cli.child.pid!;
  const shm = existsSync("/dev/shm") ? readdirSync("/dev/shm").filter((f) => f.startsWith(`memlane-${pid}-`)) : [];
  expect(shm, `left in /dev/shm: ${ctx}`).toEqual([]);
  for (const dir of runDirs(trial)) {
    const files = readdirSync(dir);
    expect(files.length, `empty run directory ${dir}: ${ctx}`).toBeGreaterThan(0);
    expect(files, `scratch dir left in ${dir}: ${ctx}`).not.toContain(".tmp");
  }
}

/** A report is complete and valid (every stage ok or skipped) or marked failed with a failed stage. */
export function expectReportSound(report: Report | null, label: string): "complete" | "failed" | "none" {
  if (report === null) return "none";
  expect(validateReport(report), label).toEqual([]);
  if (report.outcome === "failed") {
    // A stage failed or was cancelled, or the signal came after the last stage, while the run
    // was still finishing (the PyTorch estimate's probe worker): then the report says so.
    const stageEnded = report.stages.some((s) => s.status === "failed" || s.status === "cancelled");
    const interruptedAfterStages = (report.notes ?? []).some((n) => /the run was interrupted by SIG/.test(n));
    expect(stageEnded || interruptedAfterStages, label).toBe(true);
    return "failed";
  }
  expect(report.outcome, label).toBe("complete");
  for (const s of report.stages) expect(["ok", "skipped"], `${label}: stage ${s.name}`).toContain(s.status);
  return "complete";
}

export function removeTrial(trial: Trial): void {
  rmSync(path.dirname(trial.tmp), { recursive: true, force: true });
}
