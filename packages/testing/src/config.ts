import { randomBytes } from "node:crypto";
import { loadConfig, type Config } from "@webhooks/core";

export const TEST_API_KEY = "test_key_0123456789abcdefghijklmnopqrstuv";
export const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The environment of a test service: its own database and queue prefix, quick retries. */
export function testEnv(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    DATABASE_URL: databaseUrl,
    REDIS_URL,
    QUEUE_PREFIX: `test-${randomBytes(5).toString("hex")}`,
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
