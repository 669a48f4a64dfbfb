import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * vitest globalSetup: one cache directory for the fixture models generated during this run
 * (test/fixtures/cache-dir.ts), shared by every test file (the workers are started after
 * this and inherit the variable) and removed when the run ends. A caller that already set
 * MEMLANE_TEST_CACHE (scripts/test.sh, for the whole suite and ctest) owns that directory.
 */
export default function setup(): (() => void) | undefined {
  if (process.env.MEMLANE_TEST_CACHE) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "memlane-test-cache-"));
  process.env.MEMLANE_TEST_CACHE = dir;
  // The user's calibrations (~/.cache/memlane) must not change what a test run does: with a
  // PyTorch calibration cached, every run with a train stage starts an estimate probe.
  process.env.MEMLANE_CACHE_DIR ??= join(dir, "memlane-cache");
  return () => rmSync(dir, { recursive: true, force: true });
}
