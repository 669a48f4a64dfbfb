import { defineConfig } from "vitest/config";

// The fault suite (test/fault): real runs killed, interrupted and attacked at seeded random
// moments. Its own config so that `npx vitest run` (vitest.config.ts) does not run it twice:
// scripts/test.sh runs it after the main suite, `npm run fuzz` at 100x the counts
// (MEMLANE_FAULT_SCALE). Bounded to about 5 minutes on 2 cores at scale 1.
export default defineConfig({
  test: {
    include: ["test/fault/**/*.test.ts"],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    minWorkers: 1,
    reporters: ["default"],
    // Fixture models are cached in one directory per run, removed at its end.
    globalSetup: ["test/global-setup.ts"],
    // Seed, per-fault tallies and skip reasons are printed with console.log: keep them.
    silent: false,
    // As in vitest.config.ts: only an orchestrator's own children sweep shared memory.
    env: { MEMLANE_SHM_SWEEP: "0" },
  },
});
