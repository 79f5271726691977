import { jobCatalog, loadConfig, SecretBox, type Logger } from "@webhooks/core";
import { createDatabase } from "@webhooks/db";
import { connectRedis, DeliveryQueue, queueLayoutFor, type DeliveryGate } from "@webhooks/queue";
import { testEnv, waitFor } from "@webhooks/testing";
import { startTestApi } from "@webhooks/api/testing";
import { expect } from "vitest";
import { createAttemptBatches } from "../src/attempt-batches.ts";
import type { AttemptDeps } from "../src/deliver-attempt.ts";
import { createDeliveryWorker } from "../src/delivery-worker.ts";
import type { HttpSender } from "../src/http-sender.ts";
import { createWorkerMetrics } from "../src/metrics.ts";
import { SecretKeys } from "../src/secret-keys.ts";
import { workerTest as it } from "./fixtures.ts";
import { deliveriesOf, publish, subscribe } from "./stack.ts";

// Issue: the worker logged "worker error (Redis unreachable?)" when a job's lock could not be
// renewed while Redis was fine. A lock that cannot be renewed means the job left this worker (it
// was parked or rescheduled, or another worker took it over after a stall): the log must say so,
// once, and not as a Redis error.

interface LogLine {
  level: "debug" | "info" | "warn" | "error";
  fields: Record<string, unknown>;
  message: string;
}

/** A Logger that keeps what it is given, to read back in the test. */
function capturingLogger(lines: LogLine[]): Logger {
  const at = (level: LogLine["level"]) => (fields: Record<string, unknown> | string, message?: string) =>
    void lines.push(typeof fields === "string" ? { level, fields: {}, message: fields } : { level, fields, message: message ?? "" });
  const logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => logger };
  return logger as unknown as Logger;
}

it("a job whose lock another worker took is logged as having left this worker, not as a Redis error", async ({ database, defer }) => {
  const LOCK_MS = 1_000;
  const config = loadConfig(testEnv(database.url));
  const api = await startTestApi(config);
  defer(() => api.close());
  await subscribe(api, { url: "http://127.0.0.1:9/held", events: ["order.created"] });
  const event = await publish(api, { type: "order.created", data: { id: 1 } });
  const [delivery] = await deliveriesOf(api, event.id);
  const deliveryId = delivery!.id as string;

  const db = createDatabase({ databaseUrl: database.url, poolSize: 2 });
  defer(() => db.close());
  const redis = connectRedis(config, "producer");
  defer(async () => redis.disconnect());
  const workerRedis = connectRedis(config, "worker");
  defer(async () => workerRedis.disconnect());
  const lines: LogLine[] = [];
  const logger = capturingLogger(lines);
  const layout = queueLayoutFor(config);
  const queue = new DeliveryQueue(redis, layout, logger);
  defer(() => queue.close());

  // The request is held open until the test has taken the job's lock away.
  let sending = false;
  let answer: () => void = () => {};
  const answered = new Promise<void>((resolve) => (answer = resolve));
  const sender = {
    send: async () => {
      sending = true;
      await answered;
      return { durationMs: 1, responseCode: 200, responseBody: "", error: null };
    },
  } as unknown as HttpSender;
  const deps: AttemptDeps = {
    sql: db.sql,
    batches: createAttemptBatches(db.sql, 10_000, config.isolation),
    gate: { acquire: async () => ({ go: true, probe: false, wakes: [] }), release: async () => [] } as unknown as DeliveryGate,
    queue,
    sender,
    secretKeys: new SecretKeys(new SecretBox(config.secretEncryptionKey)),
    metrics: createWorkerMetrics(queue),
    logger,
    retryScheduleMs: config.worker.retryScheduleMs,
    isolation: config.isolation,
    leaseMs: 10_000,
  };
  const prefix = layout.shardPrefixes[0]!;
  const worker = createDeliveryWorker(deps, { connection: workerRedis, prefix, concurrency: 1, lockMs: LOCK_MS });
  defer(async () => {
    answer();
    await worker.close(true);
  });
  void worker.run();

  await waitFor(() => sending, { timeoutMs: 10_000 });
  // What a stall takeover does to this worker's view: its lock is gone (another worker would hold its own).
  await redis.del(`${prefix}:${jobCatalog.deliveries.queueName}:${deliveryId}:lock`);
  // BullMQ renews locks every half lockDuration; the next renewal finds the lock gone.
  await waitFor(() => lines.some((line) => line.message.startsWith("could not renew the lock")), { timeoutMs: 10_000 });
  answer();

  const renewal = lines.filter((line) => line.message.startsWith("could not renew the lock"));
  expect(renewal).toHaveLength(1);
  expect(renewal[0]).toMatchObject({
    level: "warn",
    fields: { jobIds: [deliveryId] },
    message: "could not renew the lock of jobs that left this worker (parked, rescheduled or taken over after a stall)",
  });
  expect(lines.filter((line) => line.level === "error")).toEqual([]);
});
