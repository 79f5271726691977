import { startTestApi } from "@webhooks/api/testing";
import { type Config, createLogger, type Logger, loadConfig, SecretBox } from "@webhooks/core";
import { createDatabase, type Database } from "@webhooks/db";
import { connectRedis, type DeliveryGate, DeliveryQueue, queueLayoutFor, type RedisConnection } from "@webhooks/queue";
import {
  createTestDatabase,
  type ServiceProcess,
  spawnService,
  startReceiver,
  type TestReceiver,
  testEnv,
} from "@webhooks/testing";
import { test as base } from "vitest";
import { createAttemptBatches } from "../src/attempt-batches.ts";
import type { AttemptDeps } from "../src/deliver-attempt.ts";
import type { HttpSender } from "../src/http-sender.ts";
import { type RunningWorker, startWorker } from "../src/index.ts";
import { createWorkerMetrics } from "../src/metrics.ts";
import { SecretKeys } from "../src/secret-keys.ts";
import { createWorkerState } from "../src/worker-state.ts";
import { deliveriesOf, publish, type Stack, startStack, subscribe } from "./stack.ts";

/** What `queuedAttempt` made: one queued delivery, and the dependencies of an attempt at it. */
export interface QueuedAttempt {
  config: Config;
  db: Database;
  redis: RedisConnection;
  queue: DeliveryQueue;
  deps: AttemptDeps;
  deliveryId: string;
  subscriptionId: string;
}

/**
 * The worker test set-up, as vitest fixtures. Every one is test-scoped, so tests never see each
 * other's deliveries, and made only for a test that asks for it:
 *
 * - `database`: a fresh copy of the migrated template;
 * - `stack(overrides)`: the API and an in-process worker on `database`;
 * - `receiver(reply)`: a real receiver on loopback;
 * - `inProcessWorker(env)`: one more worker in this process, for a test that starts its own;
 * - `workerProcess(env)`: a worker process of its own, killed with SIGKILL after the test;
 * - `defer(close)`: anything else the test starts (an API of its own, connections);
 * - `queuedAttempt({ gate, sender, logger })`: one queued delivery (to a closed port, published
 *   through the real API) and an attempt's dependencies around the gate and sender the test
 *   gives, for a test that drives `deliverAttempt` or a BullMQ worker itself.
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
      const worker = await startWorker(loadConfig(env), createLogger({ level: "silent", name: "worker" }), {
        metrics: false,
      });
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
  })
  .extend("queuedAttempt", async ({ database, defer }) => {
    return async (parts: {
      gate: Partial<DeliveryGate>;
      sender: Pick<HttpSender, "send">;
      logger?: Logger;
    }): Promise<QueuedAttempt> => {
      const config = loadConfig(testEnv(database.url));
      const api = await startTestApi(config);
      defer(() => api.close());
      const subscription = await subscribe(api, { url: "http://127.0.0.1:9/never", events: ["order.created"] });
      const event = await publish(api, { type: "order.created", data: { id: 1 } });
      const [delivery] = await deliveriesOf(api, event.id);
      if (!delivery) throw new Error("the event made no delivery");

      const db = createDatabase({ databaseUrl: database.url, poolSize: 2 });
      defer(() => db.close());
      const redis = connectRedis(config, "producer");
      defer(async () => redis.disconnect());
      const logger = parts.logger ?? createLogger({ level: "silent", name: "test" });
      const queue = new DeliveryQueue(redis, queueLayoutFor(config), logger);
      defer(() => queue.close());
      const deps: AttemptDeps = {
        sql: db.sql,
        batches: createAttemptBatches(db.sql, 10_000, config.isolation),
        gate: parts.gate as DeliveryGate,
        queue,
        sender: parts.sender as HttpSender,
        secretKeys: new SecretKeys(new SecretBox(config.secretEncryptionKey)),
        metrics: createWorkerMetrics(queue),
        logger,
        retryScheduleMs: config.worker.retryScheduleMs,
        isolation: config.isolation,
        leaseMs: 10_000,
        state: createWorkerState(config.worker.concurrency),
        tracing: undefined,
        sendTraceparent: false,
      };
      return { config, db, redis, queue, deps, deliveryId: delivery.id as string, subscriptionId: subscription.id };
    };
  });
