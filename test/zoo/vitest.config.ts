import { defineConfig } from "vitest/config";

// The zoo suite (npm run test:zoo): its own config, so that the main `vitest run` (which
// takes test/**/*.test.ts) does not run it a second time. One file, tests in sequence.
export default defineConfig({
  test: {
    include: ["test/zoo/*.suite.ts"],
    testTimeout: 600_000,
    hookTimeout: 1_200_000,
    maxWorkers: 1,
    minWorkers: 1,
    reporters: ["default"],
    // Fixture models are cached in one directory per run, removed at its end.
    globalSetup: ["test/global-setup.ts"],
    env: { MEMLANE_SHM_SWEEP: "0" },
  },
});
