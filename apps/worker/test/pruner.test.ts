import { createLogger, loadConfig, SecretBox } from "@webhooks/core";
import { createDatabase, createSubscription, type Database, publishEvents } from "@webhooks/db";
import { createTestDatabase, sql, type TestDatabase, testEnv, waitFor } from "@webhooks/testing";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type RunningWorker, startWorker } from "../src/index.ts";

/** Retention (docs/api.md#retention) in a running worker: the pruner runs on PRUNE_INTERVAL and deletes what RETENTION says. */
let testDb: TestDatabase;
let database: Database;
let worker: RunningWorker | undefined;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
});
afterAll(async () => {
  await worker?.close();
  await database.close();
  await testDb.drop();
});

async function metric(port: number, table: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`webhook_pruned_rows_total{table="${table}"}`));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
}

it("prunes an old delivered delivery, its attempt and its event on its interval, and counts them", async () => {
  await createSubscription(
    {
      db: database.prisma,
      secretBox: new SecretBox(Buffer.alloc(32, 6)),
      destinationPolicy: { allowHttp: true, allowPrivateNetworks: true },
      defaultMaxInFlight: 10,
    },
    { url: "https://example.com/pruned", events: ["order.paid"] },
  );
  const results = await publishEvents({ sql: database.sql }, [
    { type: "order.paid", data: { n: 1 } },
    { type: "order.paid", data: { n: 2 } },
  ]);
  const [old, recent] = results.map((r) => {
    if (r instanceof Error) throw r;
    return { event: r.event.id, delivery: r.deliveryIds[0]! };
  });
  // Both delivered (so the worker has nothing to send); one two hours ago, one just now.
  await sql(
    testDb.url,
    "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL, attempts = 1, response_code = 200",
  );
  await sql(testDb.url, "UPDATE deliveries SET created_at = now() - interval '2 hours' WHERE id = $1", [old!.delivery]);
  await sql(testDb.url, "UPDATE events SET created_at = now() - interval '2 hours' WHERE id = $1", [old!.event]);
  await sql(
    testDb.url,
    `INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code)
     SELECT 'att_' || substr(id, 5), id, subscription_id, 1, url, created_at, 12, 200 FROM deliveries`,
  );

  worker = await startWorker(
    loadConfig(testEnv(testDb.url, { RETENTION: "1h", PRUNE_INTERVAL: "200ms" })),
    createLogger({ level: "silent", name: "worker" }),
  );
  expect(await metric(worker.metricsPort, "deliveries")).toBe(0);

  await waitFor(async () => (await sql(testDb.url, "SELECT 1 FROM events WHERE id = $1", [old!.event])).length === 0, {
    timeoutMs: 10_000,
    what: "the old event to be pruned",
  });
  expect((await sql<{ id: string }>(testDb.url, "SELECT id FROM deliveries")).map((r) => r.id)).toEqual([
    recent!.delivery,
  ]);
  expect(
    (await sql<{ delivery_id: string }>(testDb.url, "SELECT delivery_id FROM delivery_attempts")).map(
      (r) => r.delivery_id,
    ),
  ).toEqual([recent!.delivery]);
  expect((await sql<{ id: string }>(testDb.url, "SELECT id FROM events")).map((r) => r.id)).toEqual([recent!.event]);
  expect(await metric(worker.metricsPort, "deliveries")).toBe(1);
  expect(await metric(worker.metricsPort, "delivery_attempts")).toBe(1);
  expect(await metric(worker.metricsPort, "events")).toBe(1);

  // It keeps running: a delivery that finishes later and is old enough goes on a later pass.
  await sql(testDb.url, "UPDATE deliveries SET created_at = now() - interval '3 hours' WHERE id = $1", [
    recent!.delivery,
  ]);
  await sql(testDb.url, "UPDATE events SET created_at = now() - interval '3 hours' WHERE id = $1", [recent!.event]);
  await waitFor(async () => (await sql(testDb.url, "SELECT 1 FROM events")).length === 0, {
    timeoutMs: 10_000,
    what: "the second event to be pruned",
  });
  expect(await metric(worker.metricsPort, "deliveries")).toBe(2);
});

it("keeps everything with RETENTION=off: no pruner runs", async () => {
  await worker?.close();
  worker = undefined;
  const results = await publishEvents({ sql: database.sql }, [{ type: "order.paid", data: { n: 3 } }]);
  const [kept] = results.map((r) => {
    if (r instanceof Error) throw r;
    return r.event.id;
  });
  await sql(
    testDb.url,
    "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL, created_at = now() - interval '400 days'",
  );
  await sql(testDb.url, "UPDATE events SET created_at = now() - interval '400 days'");
  worker = await startWorker(
    loadConfig(testEnv(testDb.url, { RETENTION: "off", PRUNE_INTERVAL: "100ms" })),
    createLogger({ level: "silent", name: "worker" }),
  );
  await new Promise((resolve) => setTimeout(resolve, 600));
  expect((await sql<{ id: string }>(testDb.url, "SELECT id FROM events")).map((r) => r.id)).toEqual([kept]);
  expect(await metric(worker.metricsPort, "deliveries")).toBeUndefined();
});

it("erases payloads past PAYLOAD_RETENTION on its interval, keeps the rows until RETENTION, and counts them", async () => {
  await worker?.close();
  worker = undefined;
  await sql(testDb.url, "DELETE FROM delivery_attempts; DELETE FROM deliveries; DELETE FROM events");
  const results = await publishEvents({ sql: database.sql }, [
    { type: "order.paid", data: { n: 4 } },
    { type: "order.paid", data: { n: 5 } },
  ]);
  const [old, recent] = results.map((r) => {
    if (r instanceof Error) throw r;
    return { event: r.event.id, delivery: r.deliveryIds[0]! };
  });
  // The old one is still queued (its receiver never reached): erasing its payload ends it.
  await sql(testDb.url, "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL WHERE id = $1", [
    recent!.delivery,
  ]);
  await sql(
    testDb.url,
    "UPDATE deliveries SET created_at = now() - interval '2 hours', next_attempt_at = now() + interval '1 day' WHERE id = $1",
    [old!.delivery],
  );
  await sql(testDb.url, "UPDATE events SET created_at = now() - interval '2 hours' WHERE id = $1", [old!.event]);

  worker = await startWorker(
    loadConfig(testEnv(testDb.url, { RETENTION: "30d", PAYLOAD_RETENTION: "1h", PRUNE_INTERVAL: "200ms" })),
    createLogger({ level: "silent", name: "worker" }),
  );
  await waitFor(async () => (await metric(worker!.metricsPort, "event_payloads")) === 1, {
    timeoutMs: 10_000,
    what: "the old payload to be erased",
  });
  const events = await sql<{ id: string; data: unknown; erased: boolean }>(
    testDb.url,
    "SELECT id, data, payload_deleted_at IS NOT NULL AS erased FROM events ORDER BY id",
  );
  expect(events).toEqual([
    { id: old!.event, data: null, erased: true },
    { id: recent!.event, data: { n: 5 }, erased: false },
  ]);
  const deliveries = await sql<{ id: string; status: string; failure_reason: string | null }>(
    testDb.url,
    "SELECT id, status::text, failure_reason FROM deliveries ORDER BY id",
  );
  expect(deliveries).toEqual([
    { id: old!.delivery, status: "failed", failure_reason: "payload_deleted" },
    { id: recent!.delivery, status: "delivered", failure_reason: null },
  ]);
  expect(await metric(worker.metricsPort, "deliveries")).toBe(0);
  expect(await metric(worker.metricsPort, "events")).toBe(0);
});
