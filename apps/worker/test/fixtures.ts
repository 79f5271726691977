import { createLogger, loadConfig } from "@webhooks/core";
import { createTestDatabase, spawnService, startReceiver, type ServiceProcess, type TestReceiver } from "@webhooks/testing";
import { test as base } from "vitest";
import { startWorker, type RunningWorker } from "../src/index.ts";
import { startStack, type Stack } from "./stack.ts";

/**
 * The worker test set-up, as vitest fixtures. Every one is test-scoped, so tests never see each
 * other's deliveries, and made only for a test that asks for it:
 *
 * - `database`: a fresh copy of the migrated template;
 * - `stack(overrides)`: the API and an in-process worker on `database`;
 * - `receiver(reply)`: a real receiver on loopback;
 * - `inProcessWorker(env)`: one more worker in this process, for a test that starts its own;
 * - `workerProcess(env)`: a worker process of its own, killed with SIGKILL after the test;
 * - `defer(close)`: anything else the test starts (an API of its own, connections).
 *
 * After the test, everything is closed most recent first: receivers and workers before the API,
 * the database last. vitest lets a fixture register one `onCleanup`, and `stack` and `receiver`
 * may be called several times, so they all push onto `defer`'s list, which closes them in that
 * order. A file with a set-up of its own adds it with `.extend("name", async ({ database, defer }) => ...)`.
 */
export const workerTest = base
  .extend("defer", async ({}, { onCleanup }) => {
    const closers: (() => Promise<unknown>)[] = [];
    onCleanup(async () => {
      // Close everything, then report the first failure, so one failing close leaks nothing.
      let failure: unknown;
      for (const close of closers.splice(0).reverse()) await close().catch((error: unknown) => (failure ??= error));
      if (failure !== undefined) throw failure;
    });
    return (close: () => Promise<unknown>): void => void closers.push(close);
  })
  .extend("database", async ({ defer }) => {
    const database = await createTestDatabase();
    defer(() => database.drop());
    return database;
  })
  .extend("stack", async ({ database, defer }) => {
    return async (overrides: Record<string, string> = {}): Promise<Stack> => {
      const started = await startStack(database.url, overrides);
      defer(() => started.close());
      return started;
    };
  })
  .extend("receiver", async ({ defer }) => {
    return async (reply?: TestReceiver["reply"]): Promise<TestReceiver> => {
      const started = await startReceiver(reply);
      defer(() => started.close());
      return started;
    };
  })
  .extend("inProcessWorker", async ({ defer }) => {
    return async (env: Record<string, string>): Promise<RunningWorker> => {
      const worker = await startWorker(loadConfig(env), createLogger({ level: "silent", name: "worker" }), { metrics: false });
      defer(() => worker.close());
      return worker;
    };
  })
  .extend("workerProcess", async ({ defer }) => {
    return async (env: Record<string, string>): Promise<ServiceProcess> => {
      // Logging at info: tests read what it did from its output.
      const worker = await spawnService("worker", { ...env, LOG_LEVEL: "info" });
      defer(async () => {
        worker.kill("SIGKILL");
        await worker.exited;
      });
      return worker;
    };
  });
