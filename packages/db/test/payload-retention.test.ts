import { SecretBox } from "@webhooks/core";
import {
  createDatabase,
  createSubscription,
  type Database,
  erasePayloadsBefore,
  pruneExpired,
  publishEvents,
} from "@webhooks/db";
import { createTestDatabase, sql, type TestDatabase } from "@webhooks/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

/**
 * PAYLOAD_RETENTION (docs/api.md#payload-retention) against real PostgreSQL: the pruner erases
 * payloads older than it, in bounded batches, as DELETE /v1/events/{id}/payload does, and keeps
 * the metadata until RETENTION.
 */
const HOUR = 3_600_000;
let testDb: TestDatabase;
let database: Database;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
  await createSubscription(
    {
      db: database.prisma,
      secretBox: new SecretBox(Buffer.alloc(32, 4)),
      destinationPolicy: { allowHttp: true, allowPrivateNetworks: true },
      defaultMaxInFlight: 10,
    },
    { url: "https://example.com/a", events: ["order.paid"] },
  );
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});
beforeEach(async () => {
  await sql(
    testDb.url,
    "DELETE FROM delivery_attempts; DELETE FROM deliveries; DELETE FROM events; DELETE FROM pruner_cursors",
  );
});

type State = "queued" | "retrying" | "delivered" | "leased";

/** Publishes an event `hoursAgo` old, its one delivery in `state`; returns the ids. */
async function seed(hoursAgo: number, state: State): Promise<{ event: string; delivery: string }> {
  const [result] = await publishEvents({ sql: database.sql }, [{ type: "order.paid", data: { card: "4242" } }]);
  if (!result || result instanceof Error) throw new Error("publish failed");
  const [event, delivery] = [result.event.id, result.deliveryIds[0]!];
  const at = `now() - interval '${hoursAgo} hours'`;
  await sql(testDb.url, `UPDATE events SET created_at = ${at} WHERE id = $1`, [event]);
  const set = {
    queued: `next_attempt_at = ${at}`,
    retrying: "status = 'failed', attempts = 1, next_attempt_at = now() + interval '1 hour'",
    delivered: "status = 'delivered', attempts = 1, response_code = 200, next_attempt_at = NULL",
    leased: `attempts = 1, leased_until = now() + interval '1 minute', lease_token = 'l', open_attempt_id = 'att_x', open_attempt_started_at = now()`,
  }[state];
  await sql(testDb.url, `UPDATE deliveries SET ${set}, created_at = ${at} WHERE id = $1`, [delivery]);
  return { event, delivery };
}

async function eventRow(id: string) {
  const [row] = await sql<{ data: unknown; erased: boolean }>(
    testDb.url,
    "SELECT data, payload_deleted_at IS NOT NULL AS erased FROM events WHERE id = $1",
    [id],
  );
  return row;
}

async function deliveryRow(id: string) {
  const [row] = await sql<{ status: string; next_attempt_at: Date | null; failure_reason: string | null }>(
    testDb.url,
    "SELECT status, next_attempt_at, failure_reason FROM deliveries WHERE id = $1",
    [id],
  );
  return row;
}

describe("a pruning pass with PAYLOAD_RETENTION", () => {
  it("erases the payloads past it, ends their deliveries still to be sent, and keeps every row", async () => {
    const delivered = await seed(3, "delivered");
    const queued = await seed(3, "queued");
    const retrying = await seed(3, "retrying");
    const leased = await seed(3, "leased");
    const recent = await seed(1, "delivered");

    const pass = await pruneExpired(
      { sql: database.sql },
      { retentionMs: 30 * 24 * HOUR, payloadRetentionMs: 2 * HOUR, batchSize: 1_000 },
    );
    expect(pass).toMatchObject({ payloads: 4, deliveries: 0, attempts: 0, events: 0, complete: true });
    for (const old of [delivered, queued, retrying, leased])
      expect(await eventRow(old.event)).toEqual({ data: null, erased: true });
    expect(await eventRow(recent.event)).toEqual({ data: { card: "4242" }, erased: false });
    expect(await deliveryRow(delivered.delivery)).toEqual({
      status: "delivered",
      next_attempt_at: null,
      failure_reason: null,
    });
    for (const ended of [queued, retrying]) {
      expect(await deliveryRow(ended.delivery)).toEqual({
        status: "failed",
        next_attempt_at: null,
        failure_reason: "payload_deleted",
      });
    }
    // Being attempted: left to its attempt (the worker ends it if that plans a retry).
    expect(await deliveryRow(leased.delivery)).toMatchObject({ status: "queued", failure_reason: null });

    // The next pass goes on from where this one stopped: nothing more to erase.
    const again = await pruneExpired(
      { sql: database.sql },
      { retentionMs: 30 * 24 * HOUR, payloadRetentionMs: 2 * HOUR, batchSize: 1_000 },
    );
    expect(again).toMatchObject({ payloads: 0, complete: true });
    // RETENTION later deletes the finished ones as usual, payload or not.
    const retained = await pruneExpired({ sql: database.sql }, { retentionMs: 2 * HOUR, batchSize: 1_000 });
    expect(retained).toMatchObject({ deliveries: 3, events: 3, payloads: 0 });
  });

  it("erases in batches of the given size, and each pass starts where the last one stopped", async () => {
    const old = [];
    for (let i = 0; i < 5; i++) old.push(await seed(3, "delivered"));
    const recent = await seed(1, "delivered");
    const before = new Date(Date.now() - 2 * HOUR);

    expect(await erasePayloadsBefore({ sql: database.sql }, { before, limit: 2 })).toEqual({
      events: 2,
      deliveries: 0,
      done: false,
    });
    const [cursor] = await sql<{ after: string }>(testDb.url, "SELECT after FROM pruner_cursors");
    expect(cursor!.after).toBe(old[1]!.event);
    expect(await erasePayloadsBefore({ sql: database.sql }, { before, limit: 2 })).toMatchObject({
      events: 2,
      done: false,
    });
    // The last old one, then the recent one: the walk stops there, before it.
    expect(await erasePayloadsBefore({ sql: database.sql }, { before, limit: 2 })).toMatchObject({
      events: 1,
      done: true,
    });
    expect(await erasePayloadsBefore({ sql: database.sql }, { before, limit: 2 })).toMatchObject({
      events: 0,
      done: true,
    });
    const [moved] = await sql<{ after: string }>(testDb.url, "SELECT after FROM pruner_cursors");
    expect(moved!.after).toBe(old[4]!.event);
    expect(await eventRow(recent.event)).toMatchObject({ erased: false });

    // An event erased by the API meanwhile counts once: the walk leaves it as it is.
    const [erasedAt] = await sql<{ at: Date }>(
      testDb.url,
      "UPDATE events SET data = NULL, payload_deleted_at = now() - interval '1 minute' WHERE id = $1 RETURNING payload_deleted_at AS at",
      [recent.event],
    );
    const pass = await pruneExpired(
      { sql: database.sql },
      { retentionMs: undefined, payloadRetentionMs: 1, batchSize: 2 },
    );
    expect(pass).toMatchObject({ payloads: 0, complete: true });
    const [still] = await sql<{ at: Date }>(testDb.url, "SELECT payload_deleted_at AS at FROM events WHERE id = $1", [
      recent.event,
    ]);
    expect(still!.at).toEqual(erasedAt!.at);
  });
});
