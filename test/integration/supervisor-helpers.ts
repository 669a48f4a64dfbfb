// Shared by the broker and supervisor suites: fixture worker specs and process checks.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, venvPython } from "../../src/workers/specs.ts";
import type { WorkerSpec } from "../../src/workers/options.ts";

export const FIXTURES = join(REPO_ROOT, "test", "fixtures", "workers");

export type FixtureName = "echo" | "crash" | "hang" | "malformed" | "wrong_version";

/** A spec that runs test/fixtures/workers/<fixture>.py with the repository's venv. */
export function fixture(name: FixtureName, workerName: string = name, env: Record<string, string> = {}): WorkerSpec {
  return { name: workerName, command: venvPython(), args: ["-u", join(FIXTURES, `${name}.py`)], env };
}

/** True while /proc/<pid> exists and is not a zombie. */
export function pidAlive(pid: number | undefined): boolean {
  if (pid === undefined || !existsSync(`/proc/${pid}`)) return false;
  try {
    const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

export async function waitUntil(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return check();
}

/** The rejection of a promise that must reject (fails the test otherwise). */
export async function rejection<E = Error>(p: Promise<unknown>): Promise<E> {
  try {
    await p;
  } catch (err) {
    return err as E;
  }
  throw new Error("expected a rejection, got a result");
}
