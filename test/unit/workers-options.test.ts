import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { isLoopbackEndpoint, resolveBrokerOptions } from "../../src/transport/endpoint.ts";
import { checkRunOptions, checkSpec, resolveSpawnOptions, SPAWN_DEFAULTS } from "../../src/workers/options.ts";
import { REPO_ROOT, venvPython, workerSpecs } from "../../src/workers/specs.ts";
import { describeExit, WorkerError } from "../../src/workers/worker-error.ts";

describe("spawn options", () => {
  it("fills frozen defaults and lets a spawn override the supervisor's", () => {
    const base = resolveSpawnOptions({ heartbeatIntervalMs: 250 });
    expect(Object.isFrozen(base)).toBe(true);
    expect(Object.isFrozen(SPAWN_DEFAULTS)).toBe(true);
    expect(base.heartbeatIntervalMs).toBe(250);
    expect(base.helloTimeoutMs).toBe(SPAWN_DEFAULTS.helloTimeoutMs);
    const o = resolveSpawnOptions({ helloTimeoutMs: 5 }, base);
    expect([o.helloTimeoutMs, o.heartbeatIntervalMs]).toEqual([5, 250]);
  });

  it("names the option, what was expected and what was received", () => {
    expect(() => resolveSpawnOptions({ helloTimeoutMs: "soon" as unknown as number })).toThrow(
      'spawn option `helloTimeoutMs`: expected a number > 0, got "soon"',
    );
    expect(() => resolveSpawnOptions({ verbose: 3 as unknown as boolean })).toThrow("spawn option `verbose`: expected a boolean or a function, got 3");
    expect(resolveSpawnOptions({ heartbeatTimeoutMs: 0 }).heartbeatTimeoutMs).toBe(0);
    expect(() => resolveSpawnOptions({ onProcess: "track" as unknown as () => void })).toThrow('spawn option `onProcess`: expected a function, got "track"');
    expect(() => checkSpec({ name: "a b", command: "x" })).toThrow('worker spec option `name`: expected a non-empty name of letters, digits, . _ @ -, got "a b"');
    expect(() => checkSpec({ name: "a", command: "" })).toThrow("worker spec option `command`");
    expect(() => checkRunOptions("t", { retries: 1.5 })).toThrow('run("t") option `retries`: expected an integer >= 0, got 1.5');
  });
});

describe("broker options", () => {
  it("knows loopback endpoints", () => {
    for (const e of ["tcp://127.0.0.1:5555", "tcp://127.1.2.3:*", "tcp://localhost:1", "tcp://[::1]:2", "ipc:///tmp/x", "inproc://y"]) {
      expect(isLoopbackEndpoint(e)).toBe(true);
    }
    for (const e of ["tcp://0.0.0.0:5555", "tcp://10.0.0.1:1", "tcp://example.com:1", "tcp://127.0.0.1.evil.com:1"]) {
      expect(isLoopbackEndpoint(e)).toBe(false);
    }
    expect(() => resolveBrokerOptions({ endpoint: "udp://x" })).toThrow("broker option `endpoint`: expected a tcp://, ipc:// or inproc:// endpoint");
  });
});

describe("WorkerError", () => {
  it("carries code and name, worker, exit and stderr tail", () => {
    const e = new WorkerError("boom", {
      code: ErrorCode.WORKER_DIED, worker: { name: "w", pid: 7 }, exitCode: 3, stderrTail: "tail", cause: new Error("c"),
    });
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe("WorkerError");
    expect([e.code, e.codeName, e.exitCode, e.signal, e.timedOut, e.stderrTail]).toEqual([9, "WORKER_DIED", 3, undefined, false, "tail"]);
    expect((e.cause as Error).message).toBe("c");
    const t = e.forTask("infer.ort", "t-1");
    expect([t.task, t.taskId, t.exitCode, t.worker.pid]).toEqual(["infer.ort", "t-1", 3, 7]);
    expect(describeExit(undefined, "SIGKILL")).toBe("was killed by SIGKILL");
    expect(describeExit(3, undefined)).toBe("exited with code 3");
  });
});

describe("worker specs", () => {
  it("launches the venv's python -m memlane_worker from the repo root", () => {
    const s = workerSpecs.python({ name: "python-ort" });
    expect(s.command).toBe(join(REPO_ROOT, ".venv", "bin", "python"));
    expect(s.args).toEqual(["-u", "-m", "memlane_worker"]);
    expect(s.name).toBe("python-ort");
  });

  it("tells the user to bootstrap when .venv is missing", () => {
    const empty = mkdtempSync(join(tmpdir(), "memlane-novenv-"));
    onTestFinished(() => rmSync(empty, { recursive: true, force: true }));
    expect(() => venvPython(empty)).toThrow(/\.venv\/bin\/python does not exist; run `npm run bootstrap`/);
    expect(() => workerSpecs.memlaneRt({ root: empty })).toThrow(/memlane-rt is not built/);
  });
});
