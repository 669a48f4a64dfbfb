import { configDefaults, defineConfig } from "vitest/config";

// Integration suites spawn real Python workers and memlane-rt processes: generous
// timeouts, and at most two files at once on the 2-core machines this runs on.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The fault suite has its own config (vitest.fault.config.ts), run once by scripts/test.sh.
    exclude: [...configDefaults.exclude, "test/fault/**"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    minWorkers: 1,
    reporters: ["default"],
    // Fixture models are cached in one directory per run, removed at its end.
    globalSetup: ["test/global-setup.ts"],
    // Every orchestrator's first shared-memory registry sweeps the segments of dead
    // orchestrators. Test files run in parallel, and one that SIGKILLs an orchestrator on
    // purpose must see its segments stay until it sweeps them itself: only its own child
    // processes sweep (test/integration/shm-lifecycle.test.ts turns it back on for them).
    env: { MEMLANE_SHM_SWEEP: "0" },
  },
});
