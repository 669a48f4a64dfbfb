/**
 * Runs `fn` with the process's TMPDIR set to `dir` (the run's scratch directory): for what
 * reads the real environment rather than a worker's own. onnxruntime-node's telemetry writes
 * `mat-debug-<pid>.log` and `.ses` into TMPDIR when a thread first creates a session (native
 * code reads the environment only the main thread's process.env sets), and pythonia's
 * interpreter inherits the environment when it starts. Benchmarks run exclusive, so nothing
 * else reads TMPDIR meanwhile.
 */
export async function withProcessTmpdir<T>(dir: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (dir === undefined) return fn();
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}
