import { describe, expect, it } from "vitest";
import { pipeline, OptionError } from "../../src/index.ts";
import { DEFAULT_RETRIES, exitCause, retryNote, workerDied } from "../../src/pipeline/attempts.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { ErrorCode } from "../../src/transport/protocol.ts";

const died = (signal?: NodeJS.Signals, exitCode?: number): WorkerError =>
  new WorkerError("worker died", { code: ErrorCode.WORKER_DIED, worker: { name: "w", pid: 7 }, ...(signal ? { signal } : {}), ...(exitCode !== undefined ? { exitCode } : {}) });

describe("stage retries", () => {
  it("defaults to 1 for train, export and python stages, 0 for measurements; `retries` overrides", () => {
    const p = pipeline("r")
      .train({ arch: "digits-cnn" })
      .export()
      .benchmark("python-ort")
      .benchmark("native", { retries: 2 })
      .checkpointLoad()
      .python("py", async () => 1);
    const by = Object.fromEntries(p.stages.map((s) => [s.name, s.retries]));
    expect(by).toEqual({ train: 1, export: 1, "bench:python-ort": 0, "bench:native": 2, "checkpoint-load": 0, py: 1 });
    expect(DEFAULT_RETRIES.benchmark).toBe(0);
  });

  it("refuses a retries that is not an integer in [0, 10], naming the stage", () => {
    expect(() => pipeline("r").train({ arch: "digits-cnn", retries: -1 })).toThrow(OptionError);
    expect(() => pipeline("r").train({ arch: "digits-cnn", retries: 1.5 })).toThrow(/stage "train": retries: expected an integer in \[0, 10\]/);
    expect(() => pipeline("r").train({ arch: "digits-cnn" }).export({ retries: 11 })).toThrow(/stage "export": retries/);
  });

  it("retries only a dead or timed-out worker, and says how each attempt ended", () => {
    expect(workerDied(died("SIGKILL"))).toBe(true);
    expect(workerDied(new WorkerError("t", { code: ErrorCode.TIMEOUT, worker: { name: "w", pid: 1 }, timedOut: true }))).toBe(true);
    expect(workerDied(new WorkerError("boom", { code: ErrorCode.TASK_FAILED, worker: { name: "w", pid: 1 } }))).toBe(false);
    expect(workerDied(new Error("minAccuracy"))).toBe(false);
    expect(exitCause(died("SIGKILL"))).toBe("SIGKILL");
    expect(exitCause(died(undefined, 3))).toBe("exit code 3");
    expect(exitCause(new Error("bad\nmore"))).toBe("error: bad");
  });

  it("notes a retried benchmark: which attempt died how, and that its figures come from one attempt", () => {
    const note = retryNote("bench:native", "benchmark", [
      { attempt: 1, pid: 10, startMs: 0, endMs: 1, status: "failed", exit: "SIGKILL" },
      { attempt: 2, pid: 11, startMs: 1, endMs: 2, status: "ok", exit: null },
    ]);
    expect(note).toBe('stage "bench:native" was retried: attempt 1 (pid 10) ended by SIGKILL; attempt 2 (pid 11) succeeded; its figures come from attempt 2 alone.');
  });
});

describe("attempts, outcome and notes in the report", () => {
  it("are written by buildReport, checked by validateReport and shown in report.md", async () => {
    const { realisticRun } = await import("./report-fixture.ts");
    const { buildReport } = await import("../../src/report/build.ts");
    const { validateReport } = await import("../../src/report/validate.ts");
    const { renderMarkdown } = await import("../../src/report/markdown.ts");
    const run = realisticRun();
    const stage = run.stages[0]!;
    stage.attempts = [
      { attempt: 1, pid: 41, startMs: stage.startMs, endMs: stage.startMs + 5, status: "failed", exit: "SIGKILL" },
      { attempt: 2, pid: stage.pid, startMs: stage.startMs + 5, endMs: stage.endMs, status: "ok", exit: null },
    ];
    const report = buildReport({ ...run, outcome: "failed", notes: ["another memlane run was active when this run started: pid 9 (run x)"] });
    expect(report.outcome).toBe("failed");
    expect(validateReport(report)).toEqual([]);
    const md = renderMarkdown(report);
    expect(md).toMatch(/This run failed: a partial report/);
    expect(md).toMatch(/- another memlane run was active when this run started/);
    expect(md).toMatch(new RegExp(`\\| ${stage.name} \\| 1 \\| 41 \\| failed \\| 5 \\| SIGKILL \\|`));
    expect(buildReport(run).outcome).toBe("complete");
    const bad = JSON.parse(JSON.stringify(report)) as Record<string, any>;
    bad.outcome = "maybe";
    bad.stages[0].attempts[0].exit = 3;
    expect(validateReport(bad)).toEqual(expect.arrayContaining([
      'report.outcome: expected "complete" or "failed", received "maybe"',
      "report.stages[0].attempts[0].exit: expected string|null, received number",
    ]));
  });
});
