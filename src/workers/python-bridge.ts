/**
 * Ad-hoc Python from TypeScript for `python` stages, through pythonia. pythonia spawns its
 * interpreter when its module is first loaded, from `$PYTHON_BIN` (else `python3`), so we set
 * PYTHON_BIN to the project's venv before the (lazy) import. Its process is a singleton per
 * orchestrator; `openPythonBridge` restarts it when a previous bridge stopped it. Its pid is
 * given to `onProcess` as soon as the interpreter is started, so that the memory sampler
 * tracks it like any worker, from its start-up on.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { ChildProcess } from "node:child_process";
import { ErrorCode } from "../transport/protocol.ts";
import { describeExit, WorkerError } from "./worker-error.ts";

/** The tagged-template bridge a `python` stage receives (pythonia's `py` and `python`). */
export interface PyBridge {
  /** Evaluates a Python expression: `await py\`np.arange(${n}).sum()\``. */
  py: ((strings: TemplateStringsArray, ...values: unknown[]) => Promise<any>) & {
    /** Executes Python statements. */
    exec: (strings: TemplateStringsArray, ...values: unknown[]) => Promise<any>;
  };
  /** Imports a Python module: `const np = await python("numpy")`. */
  python: (module: string) => Promise<any>;
  /**
   * Executes statements in this bridge's persistent namespace (names survive across calls),
   * after binding `vars` (JSON-able values) in it.
   */
  run: (code: string, vars?: Record<string, unknown>) => Promise<void>;
  /** Evaluates an expression in that namespace and returns it as a plain JS value (via JSON). */
  value: <T = unknown>(expr: string) => Promise<T>;
  /** Pid of the Python interpreter behind the bridge. */
  pid: number;
}

export interface PythonBridgeHandle {
  bridge: PyBridge;
  pid: number;
  /** Stops the interpreter (SIGTERM, SIGKILL after `killAfterMs`) and waits for its exit. */
  close(killAfterMs?: number): Promise<void>;
  /**
   * Resolves when the interpreter exits, with how: a call pending then would wait forever
   * (pythonia does not reject it), so a stage races its code with this.
   */
  exited: Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }>;
}

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The interpreter the bridge uses: $MEMLANE_PYTHON, else the repo's .venv, else python3. */
export function bridgePython(): string {
  if (process.env.MEMLANE_PYTHON) return process.env.MEMLANE_PYTHON;
  const venv = path.join(REPO, ".venv/bin/python");
  return existsSync(venv) ? venv : "python3";
}

/**
 * pythonia throws a PythonException with an empty message and the Python error at the end
 * of its stack; this makes an Error whose message is the Python error (`IndexError: ...`)
 * and whose `traceback` holds the bridge's account of where it happened.
 */
export function pythonError(err: unknown): unknown {
  if (!(err instanceof Error) || err.message !== "" || typeof err.stack !== "string") return err;
  const stack = err.stack;
  const py = /\*\*\* JS \*\*\* (.+)$/m.exec(stack)?.[1]?.trim();
  if (!py) return err;
  const where = stack.split("\n").filter((l) => /^\s+at .*<string>|^\s+at <module>/.test(l) || /Call to '.*' failed/.test(l));
  return Object.assign(new Error(`python: ${py}`, { cause: err }), { traceback: [...where, py].join("\n") });
}

interface PythoniaModule {
  py: PyBridge["py"];
  builtins: { exec(code: string, ns: unknown): Promise<unknown>; eval(code: string, ns: unknown): Promise<unknown> };
  python: ((m: string) => Promise<any>) & { exit(): void };
  com: { proc: ChildProcess | null; start(): void };
}

let loaded: PythoniaModule | undefined;

async function loadPythonia(): Promise<PythoniaModule> {
  if (!loaded) {
    process.env.PYTHON_BIN = bridgePython();
    const mod = (await import("pythonia")) as unknown as PythoniaModule & { default?: PythoniaModule };
    loaded = (mod.default ?? mod) as PythoniaModule;
  }
  return loaded;
}

/** Options of {@link openPythonBridge}. */
export interface PythonBridgeOptions {
  /**
   * Called once the interpreter's pid is known, before the first round trip (so also when
   * that fails): `exited` resolves when the interpreter has exited.
   */
  onProcess?: (p: { pid: number; exited: Promise<void> }) => void;
}

/** Starts (or restarts) the pythonia interpreter and waits until it answers. */
export async function openPythonBridge(options: PythonBridgeOptions = {}): Promise<PythonBridgeHandle> {
  const m = await loadPythonia();
  // A previous interpreter that died (SIGKILL...) is still pythonia's proc: start a new one.
  const dead = (c: ChildProcess | null): boolean => c === null || c.exitCode !== null || c.signalCode !== null;
  if (dead(m.com.proc)) m.com.start();
  const proc = m.com.proc!;
  const pid = proc.pid;
  if (pid === undefined) throw new Error(`python bridge: could not start ${process.env.PYTHON_BIN}`);
  // pythonia writes to the IPC channel from a timer; if the interpreter died that emits
  // 'error' on the child, which would otherwise crash the orchestrator.
  proc.on("error", () => {});
  const exited = new Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve({ exitCode: proc.exitCode, signal: proc.signalCode });
    else proc.once("exit", (exitCode, signal) => resolve({ exitCode, signal }));
  });
  options.onProcess?.({ pid, exited: exited.then(() => {}) });
  // A first round trip: fails here (not inside the stage) if the interpreter is broken.
  // pythonia evaluates each call with fresh locals; a dict of our own keeps state between calls.
  // pythonia never settles a call whose interpreter died: its exit fails the start-up instead.
  const died = exited.then(({ exitCode, signal }) => {
    throw new WorkerError(`the python bridge's interpreter (pid ${pid}) ${describeExit(exitCode ?? undefined, signal ?? undefined)} while starting`, {
      code: ErrorCode.WORKER_DIED,
      worker: { name: "python-bridge", pid },
      ...(exitCode !== null ? { exitCode } : {}),
      ...(signal !== null ? { signal } : {}),
    });
  });
  died.catch(() => {});
  const ns = (await Promise.race([m.py`{"__builtins__": __builtins__}`, died])) as { update(v: Record<string, unknown>): Promise<unknown> };
  await Promise.race([m.builtins.exec("import json as __memlane_json", ns), died]);
  let closed = false;
  const bridge: PyBridge = {
    py: m.py,
    python: (name: string) => m.python(name),
    pid,
    async run(code, vars) {
      try {
        if (vars && Object.keys(vars).length > 0) await ns.update(vars);
        await m.builtins.exec(code, ns);
      } catch (err) {
        throw pythonError(err);
      }
    },
    async value<T>(expr: string): Promise<T> {
      try {
        const text = (await m.builtins.eval(`__memlane_json.dumps(${expr})`, ns)) as string;
        return JSON.parse(text) as T;
      } catch (err) {
        throw pythonError(err);
      }
    },
  };
  return {
    pid,
    bridge,
    exited,
    async close(killAfterMs = 2000) {
      if (closed) return void (await exited);
      closed = true;
      try {
        if (m.com.proc === proc) m.python.exit();
        else proc.kill("SIGTERM");
      } catch {
        proc.kill("SIGTERM");
      }
      const timer = setTimeout(() => proc.kill("SIGKILL"), killAfterMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
