/**
 * How to launch the project's own workers: the Python worker from the repository's .venv,
 * and memlane-rt from its build. Paths resolve against the repository root, not the cwd.
 */
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { WorkerSpec } from "./options.ts";

/** The repository root (this file lives in src/workers/). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Options of {@link workerSpecs.python} and {@link workerSpecs.memlaneRt}. */
export interface WorkerSpecOptions {
  /** Worker name (default `python` / `memlane-rt`). */
  name?: string;
  /** Extra arguments before `--connect`. */
  args?: string[];
  env?: Record<string, string>;
  /** Repository root to resolve `.venv` and the native build against (default: this checkout). */
  root?: string;
}

/** The interpreter of the repository's virtual environment; a clear error if it is missing. */
export function venvPython(root = REPO_ROOT): string {
  const python = join(root, ".venv", "bin", "python");
  if (!existsSync(python)) {
    throw new Error(`the Python environment is missing: ${python} does not exist; run \`npm run bootstrap\` in ${root} first`);
  }
  return python;
}

/** Where memlane-rt is built (override with MEMLANE_RT); a clear error if it is not built. */
export function memlaneRtBinary(root = REPO_ROOT): string {
  const fromEnv = process.env.MEMLANE_RT;
  const candidates = fromEnv ? [fromEnv] : [join(root, "native", "build", "memlane-rt"), join(root, "native", "build", "runtime", "memlane-rt")];
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`memlane-rt is not built: none of ${candidates.join(", ")} exists; run \`npm run bootstrap\` (it builds native/) first`);
  }
  return found;
}

/** Specs for the project's workers, ready for {@link Supervisor.spawn}. */
export const workerSpecs = Object.freeze({
  /** `<repo>/.venv/bin/python -m memlane_worker` (unbuffered, so stderr tails are current). */
  python(options: WorkerSpecOptions = {}): WorkerSpec {
    const root = options.root ?? REPO_ROOT;
    return {
      name: options.name ?? "python",
      command: venvPython(root),
      args: ["-u", "-m", "memlane_worker", ...(options.args ?? [])],
      env: { PYTHONPATH: join(root, "python"), ...(options.env ?? {}) },
      cwd: root,
    };
  },
  /**
   * The memlane-rt binary, e.g. with `args: ["--device", "cuda"]`. OpenBLAS is told one
   * thread before it loads: memlane-rt runs it single-threaded (its own pool splits the
   * products), and threads OpenBLAS started at load would sit idle with stacks counted in USS.
   */
  memlaneRt(options: WorkerSpecOptions = {}): WorkerSpec {
    const root = options.root ?? REPO_ROOT;
    return {
      name: options.name ?? "memlane-rt",
      command: memlaneRtBinary(root),
      args: [...(options.args ?? [])],
      env: { OPENBLAS_NUM_THREADS: "1", ...(options.env ?? {}) },
      cwd: root,
    };
  },
});
