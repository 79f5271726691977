import { randomBytes } from "node:crypto";
import { type Config, loadConfig } from "@webhooks/core";

export const TEST_API_KEY = "test_key_0123456789abcdefghijklmnopqrstuv";
export const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
/**
 * The REDIS_URL of a test's private Redis Cluster (redis-cluster.ts): its nodes take no password
 * or TLS, and a cluster has only database 0, so TEST_REDIS_URL (which may name another) is not it.
 */
export const PRIVATE_CLUSTER_REDIS_URL = "redis://127.0.0.1";

/**
 * A fresh queue prefix. Within a suite run (vitest's global setup sets TEST_RUN_ID) every prefix
 * starts with the run's, so that the run's end can delete whatever keys its tests left in the
 * shared Redis without touching another run's.
 */
export function testQueuePrefix(): string {
  const run = process.env.TEST_RUN_ID;
  return `${run ? testRunPrefix(run) : "test-"}${randomBytes(5).toString("hex")}`;
}

/** The prefix every queue prefix of this suite run starts with (see testQueuePrefix). */
export function testRunPrefix(run: string): string {
  return `test-${run}-`;
}

/**
 * The environment of a test service: its own database and queue prefix, quick retries. With
 * REDIS_CLUSTER_NODES among the overrides it uses that private cluster instead of the shared Redis.
 */
export function testEnv(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    DATABASE_URL: databaseUrl,
    REDIS_URL: overrides.REDIS_CLUSTER_NODES === undefined ? REDIS_URL : PRIVATE_CLUSTER_REDIS_URL,
    QUEUE_PREFIX: testQueuePrefix(),
    API_KEYS: TEST_API_KEY,
    PORT: "0",
    HOST: "127.0.0.1",
    WORKER_METRICS_PORT: "0",
    RETRY_SCHEDULE: "100ms,200ms,300ms",
    DELIVERY_TIMEOUT: "2s",
    RECONCILE_INTERVAL: "500ms",
    JOB_LOCK_DURATION: "5s",
    SHUTDOWN_TIMEOUT: "10s",
    ...overrides,
  };
}

export function testConfig(databaseUrl: string, overrides: Record<string, string> = {}): Config {
  return loadConfig(testEnv(databaseUrl, overrides));
}
