import { createLogger, loadConfig, SecretBox } from "@webhooks/core";
import { createDatabase } from "@webhooks/db";
import { connectRedis, DeliveryQueue, queueLayoutFor, type DeliveryGate, type GateDecision } from "@webhooks/queue";
import { testEnv } from "@webhooks/testing";
import { startTestApi } from "@webhooks/api/testing";
import { describe, expect } from "vitest";
import { createAttemptBatches } from "../src/attempt-batches.ts";
import { deliverAttempt, type AttemptDeps } from "../src/deliver-attempt.ts";
import type { HttpSender } from "../src/http-sender.ts";
import { createWorkerMetrics } from "../src/metrics.ts";
import { SecretKeys } from "../src/secret-keys.ts";
import { workerTest } from "./fixtures.ts";
import { deliveriesOf, publish, subscribe } from "./stack.ts";

// The claim records the attempt as started (contract §5); when the gate does not let it start,
// whether it says "wait" or cannot be asked at all, the attempt must be taken back: nothing was
// sent, so nothing may count (contract §11: waiting spends no attempt).

/** `setUp(acquire)`: one queued delivery, and an attempt's dependencies around a gate the test controls. */
const it = workerTest.extend("setUp", async ({ database, defer }) => async (acquire: () => Promise<GateDecision>) => {
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
  const queue = new DeliveryQueue(redis, queueLayoutFor(config), createLogger({ level: "silent", name: "test" }));
  defer(() => queue.close());
  const sent: string[] = [];
  const deps: AttemptDeps = {
    sql: db.sql,
    batches: createAttemptBatches(db.sql, 10_000, config.isolation),
    gate: { acquire, release: async () => [] } as unknown as DeliveryGate,
    queue,
    sender: { send: async (url: string) => (sent.push(url), { durationMs: 1, responseCode: 200, responseBody: "", error: null }) } as unknown as HttpSender,
    secretKeys: new SecretKeys(new SecretBox(config.secretEncryptionKey)),
    metrics: createWorkerMetrics(queue),
    logger: createLogger({ level: "silent", name: "test" }),
    retryScheduleMs: config.worker.retryScheduleMs,
    isolation: config.isolation,
    leaseMs: 10_000,
  };
  const stored = async () => {
    const [row] = await db.sql.query<{ attempts: number; attemptOpen: boolean; leaseToken: string | null; logged: number }>(
      `SELECT attempts, attempt_open AS "attemptOpen", lease_token AS "leaseToken",
              (SELECT count(*)::int FROM delivery_attempts WHERE delivery_id = $1) AS logged
       FROM deliveries WHERE id = $1`,
      [delivery.id],
    );
    return row;
  };
  return { deps, deliveryId: delivery.id as string, subscriptionId: subscription.id, sent, stored };
});

describe("an attempt the gate does not let start", () => {
  it("is taken back when the destination makes it wait", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(async () => ({ go: false, reason: "max_in_flight", wakes: [] }));
    const next = await deliverAttempt(deps, deliveryId);
    expect(next.kind).toBe("parked");
    expect(sent).toEqual([]);
    expect(await stored()).toEqual({ attempts: 0, attemptOpen: false, leaseToken: null, logged: 0 });
  });

  it("is taken back when the gate cannot be asked (Redis failed), and the job fails", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(async () => {
      throw new Error("Connection is closed.");
    });
    await expect(deliverAttempt(deps, deliveryId)).rejects.toThrow("Connection is closed.");
    expect(sent).toEqual([]);
    expect(await stored()).toEqual({ attempts: 0, attemptOpen: false, leaseToken: null, logged: 0 });
  });

  it("is sent and recorded once when the gate lets it start (the same set-up, for contrast)", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(async () => ({ go: true, probe: false, wakes: [] }));
    const next = await deliverAttempt(deps, deliveryId);
    expect(next.kind).toBe("done");
    expect(sent).toEqual(["http://127.0.0.1:9/never"]);
    expect(await stored()).toEqual({ attempts: 1, attemptOpen: false, leaseToken: null, logged: 1 });
  });
});
