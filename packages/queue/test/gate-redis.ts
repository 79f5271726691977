import { REDIS_URL, testQueuePrefix } from "@webhooks/testing";
import { afterAll } from "vitest";
import { createRedisConnection, deleteKeysOfPrefix, type RedisConnection } from "../src/index.ts";

/**
 * For a test file of the gate alone: one connection to the suite's Redis, and a fresh key prefix
 * per gate (`newPrefix`), whose keys are deleted, and the connection closed, after the file.
 * Call it at the top of the file.
 */
export function gateTestRedis(): { redis: RedisConnection; newPrefix(): string } {
  const redis = createRedisConnection(REDIS_URL, "gate");
  const prefixes: string[] = [];
  afterAll(async () => {
    for (const prefix of prefixes) await deleteKeysOfPrefix(redis, prefix);
    redis.disconnect();
  });
  return {
    redis,
    newPrefix() {
      const prefix = testQueuePrefix();
      prefixes.push(prefix);
      return prefix;
    },
  };
}
