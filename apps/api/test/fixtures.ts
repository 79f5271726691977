import { startTestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { createTestDatabase, spawnService, startReceiver, testEnv } from "@webhooks/testing";
import { test as base } from "vitest";

export interface ApiTestOptions {
  /** Settings on top of the test environment's (testEnv), e.g. BODY_LIMIT_BYTES. */
  env?: Record<string, string>;
  /** Replaces Date.now for the API's key cache and session expiry, so a test moves time instead of waiting. */
  clock?: () => number;
}

/**
 * The API test set-up, as vitest fixtures: `database` (a fresh copy of the migrated template),
 * `env` (the environment the API runs with, for a CLI the test spawns against the same database
 * and Redis) and `api` (the real app on a real server). Each is made once per file, on the first
 * test that asks for it, and torn down after the file's last test.
 *
 * A file calls `apiTest()` once and writes its tests with the result; a file that needs a seed
 * adds it with `.extend("seed", { scope: "file" }, async ({ api }) => ...)`.
 */
export function apiTest(options: ApiTestOptions = {}) {
  return base
    .extend("database", { scope: "file" }, async ({}, { onCleanup }) => {
      const database = await createTestDatabase();
      onCleanup(() => database.drop());
      return database;
    })
    .extend("env", { scope: "file" }, async ({ database }) => testEnv(database.url, options.env))
    .extend("api", { scope: "file" }, async ({ env }, { onCleanup }) => {
      const api = await startTestApi(loadConfig(env), options.clock ? { clock: options.clock } : {});
      onCleanup(() => api.close());
      return api;
    });
}

/**
 * apiTest, with deliveries really made: a worker process on the same database and Redis (started
 * for the file whether or not a test names it) and `receiver`, a real receiver on loopback that
 * records every webhook and answers 200. A test tells its subscriptions apart by the path of their
 * url (`${receiver.url}/a`).
 */
export function deliveringApiTest(options: ApiTestOptions = {}) {
  return apiTest(options)
    .extend("worker", { scope: "file", auto: true }, async ({ env }, { onCleanup }) => {
      const worker = await spawnService("worker", { ...env, LOG_LEVEL: "info" });
      onCleanup(async () => {
        worker.kill("SIGTERM");
        await worker.exited;
      });
      return worker;
    })
    .extend("receiver", { scope: "file" }, async ({}, { onCleanup }) => {
      const receiver = await startReceiver();
      onCleanup(() => receiver.close());
      return receiver;
    });
}
