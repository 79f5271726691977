// vitest globalSetup (vitest.config.ts): names the suite run, so that every queue prefix its tests
// take starts with the run's (testQueuePrefix), and at the end deletes what those tests left in
// the shared Redis. Tests delete their own keys as they close, but not all can: a worker process
// killed on purpose, or a fixture torn down while a job still writes, leaves a few behind.
import { randomBytes } from "node:crypto";
import { REDIS_URL, testRunPrefix } from "@webhooks/testing";
import { Redis } from "ioredis";
import { deleteKeysMatching } from "../src/redis.ts";

export function setup(): () => Promise<void> {
  const run = randomBytes(4).toString("hex");
  // Set before vitest starts the test processes, which inherit it.
  process.env.TEST_RUN_ID = run;
  return async () => {
    const redis = new Redis(REDIS_URL);
    try {
      // Plain prefixes, and the hash-tagged ones of sharded queues ({prefix:0}).
      await deleteKeysMatching(redis, `${testRunPrefix(run)}*`);
      await deleteKeysMatching(redis, `{${testRunPrefix(run)}*`);
    } finally {
      redis.disconnect();
    }
  };
}
