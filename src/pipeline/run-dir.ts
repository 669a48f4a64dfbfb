/** Run directories and their artifacts: runs/<runId>/, written atomically (temp + rename). */
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, rmdirSync, rmSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

/** `20261121-193800-a1b2c3`: sortable by time, unique by the random suffix. */
export function newRunId(now = new Date()): string {
  const p = (n: number): string => String(n).padStart(2, "0");
  const stamp = `${now.getUTCFullYear()}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())}-${p(now.getUTCHours())}${p(now.getUTCMinutes())}${p(now.getUTCSeconds())}`;
  return `${stamp}-${randomBytes(3).toString("hex")}`;
}

export async function createRunDir(outDir: string, runId = newRunId()): Promise<{ runId: string; runDir: string }> {
  const runDir = path.resolve(outDir, runId);
  await mkdir(runDir, { recursive: true });
  return { runId, runDir };
}

/** Writes `file` atomically: a reader sees the old file or the whole new one, never a part. */
export async function writeAtomic(file: string, data: string | Uint8Array): Promise<string> {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(3).toString("hex")}`;
  try {
    await writeFile(tmp, data);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return file;
}

/** An artifact path inside the run directory; refuses names that would escape it. */
export function artifactPath(runDir: string, name: string): string {
  const p = path.resolve(runDir, name);
  if (path.dirname(p) !== runDir && !p.startsWith(runDir + path.sep))
    throw new Error(`artifact name: expected a file name inside the run directory, received ${JSON.stringify(name)}`);
  return p;
}

/** Name of the run's scratch directory inside runs/<runId>/. */
export const SCRATCH_NAME = ".tmp";

/**
 * runs/<runId>/.tmp: the TMPDIR of everything the run starts (workers, chromium, the
 * node-ort thread's ONNX Runtime, torch's inductor cache), so that what they leave in a
 * temporary directory stays inside the run. Removed by `remove()` and, should the process
 * end first (Ctrl-C, a crash), by an 'exit' hook registered before the directory exists.
 */
export function createScratchDir(runDir: string): { path: string; remove(): void } {
  const dir = path.join(runDir, SCRATCH_NAME);
  const remove = (): void => {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // an exit hook must not throw; what is left lies inside the run directory
    }
  };
  // On an exit before the run ends (Ctrl-C, SIGTERM): the scratch dir, and the run
  // directory too when nothing was written to it yet.
  const onExit = (): void => {
    remove();
    removeIfEmpty(runDir);
  };
  process.once("exit", onExit);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return {
    path: dir,
    remove: () => {
      process.removeListener("exit", onExit);
      remove();
    },
  };
}

/** Removes `runDir` when a failure left nothing in it (a run that wrote nothing leaves no trace). */
export function removeIfEmpty(runDir: string): boolean {
  try {
    if (readdirSync(runDir).length > 0) return false;
    rmdirSync(runDir);
    return true;
  } catch {
    return false;
  }
}
