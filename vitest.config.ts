import { defineConfig } from "vitest/config";

// Integration suites spawn real Python workers and memlane-rt processes: generous
// timeouts, and at most two files at once on the 2-core machines this runs on.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    minWorkers: 1,
    reporters: ["default"],
  },
});
