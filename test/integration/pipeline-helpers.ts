/** Helpers of the CLI/pipeline integration tests: run the CLI, watch its processes. */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * A temp dir for a test file, with a memlane cache dir inside it that this process uses while
 * the file's tests run (the CLIs it starts get it through their env): calibrations made there
 * are the test's own. Both go when the file ends.
 */
export function tempDirWithCache(prefix: string): { dir: string; cache: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  const cache = path.join(dir, "cache");
  const saved = process.env.MEMLANE_CACHE_DIR;
  beforeAll(() => void (process.env.MEMLANE_CACHE_DIR = cache));
  afterAll(() => {
    if (saved === undefined) delete process.env.MEMLANE_CACHE_DIR;
    else process.env.MEMLANE_CACHE_DIR = saved;
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, cache };
}

export interface Cli {
  child: ChildProcess;
  tag: string;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  waitFor(re: RegExp, timeoutMs?: number): Promise<void>;
}

/** Starts `memlane <args>` (node --import tsx src/cli/main.ts) tagged through its environment. */
/** Runs `memlane <args>`; `prefix` runs it through a wrapper (e.g. `ip netns exec NS`). */
export function startCli(args: string[], env: Record<string, string> = {}, prefix: string[] = []): Cli {
  const tag = `memlane-test-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const argv = [...prefix, process.execPath, "--import", "tsx", path.join(ROOT, "src/cli/main.ts"), ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: ROOT,
    env: { ...process.env, MEMLANE_TEST_TAG: tag, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const waiters: Array<() => void> = [];
  child.stdout!.on("data", (d: Buffer) => ((out += d.toString()), waiters.forEach((w) => w())));
  child.stderr!.on("data", (d: Buffer) => ((err += d.toString()), waiters.forEach((w) => w())));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    tag,
    stdout: () => out,
    stderr: () => err,
    exit,
    waitFor(re, timeoutMs = 90_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (re.test(out) || re.test(err)) {
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${re}; stdout:\n${out}\nstderr:\n${err}`)), timeoutMs);
        waiters.push(check);
        check();
      });
    },
  };
}

/** Pids of live (non-zombie) processes whose environment carries `tag`. */
export function taggedPids(tag: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const env = readFileSync(`/proc/${d}/environ`, "latin1");
      if (!env.includes(`MEMLANE_TEST_TAG=${tag}`)) continue;
      const stat = readFileSync(`/proc/${d}/stat`, "latin1");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      pids.push(Number(d));
    } catch {
      // gone, or not ours
    }
  }
  return pids;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ");
  } catch {
    return "";
  }
}

/** Waits until no tagged process is left (they may take a moment to be reaped). */
export async function expectNoneLeft(tag: string, withinMs = 5000): Promise<number[]> {
  const until = Date.now() + withinMs;
  for (;;) {
    const left = taggedPids(tag);
    if (left.length === 0 || Date.now() > until) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}
