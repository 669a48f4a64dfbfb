/** Run directories and their artifacts: runs/<runId>/, written atomically (temp + rename). */
import { randomBytes } from "node:crypto";
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
