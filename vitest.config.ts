import { defineConfig } from "vitest/config";

// One suite for the whole repository, against real PostgreSQL and Redis (docs/testing.md).
// Each test file gets its own database and queue prefix, so files run in parallel.
export default defineConfig({
  test: {
    include: ["apps/*/test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
    globalSetup: ["packages/db/test/global-setup.ts", "packages/queue/test/global-setup.ts"],
    pool: "forks",
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
