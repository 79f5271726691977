import { SecretBox } from "@webhooks/core";
import {
  createDatabase,
  createSubscription,
  type Database,
  deleteSubscription,
  type PrunedRows,
  pruneExpired,
  pruneFinishedDeliveries,
  publishEvents,
  UNSCOPED,
  updateSubscription,
  withPrunerLock,
} from "@webhooks/db";
import { createTestDatabase, sql, type TestDatabase } from "@webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

/** Retention (docs/api.md#retention) against real PostgreSQL: what the pruner deletes, what it keeps, and how. */
const DAY = 24 * 3_600_000;
let testDb: TestDatabase;
let database: Database;
let other: Database;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
  // A second pool: another worker's pruner, on connections of its own.
  other = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
  const ctx = {
    db: database.prisma,
    secretBox: new SecretBox(Buffer.alloc(32, 4)),
    destinationPolicy: { allowHttp: true, allowPrivateNetworks: true },
    defaultMaxInFlight: 10,
  };
  await createSubscription(ctx, { url: "https://example.com/a", events: ["order.paid", "order.both"] });
  await createSubscription(ctx, { url: "https://example.com/b", events: ["order.both"] });
});
afterAll(async () => {
  await other.close();
  await database.close();
  await testDb.drop();
});
beforeEach(async () => {
  await sql(testDb.url, "DELETE FROM delivery_attempts; DELETE FROM deliveries; DELETE FROM events");
});

type State = "queued" | "retrying" | "final" | "delivered";
type Age = "old" | "new";

/**
 * Publishes an event whose deliveries (one per matching subscription: order.paid has one,
 * order.both two, nothing.matched none) are put in the given states, with `attempts` attempts
 * each; old rows were created two days ago, new ones an hour ago. Returns the ids.
 */
async function seed(
  type: "order.paid" | "order.both" | "nothing.matched",
  age: Age,
  states: State[],
  attempts = 1,
): Promise<{ event: string; deliveries: string[] }> {
  const [result] = await publishEvents({ sql: database.sql }, [{ type, data: {} }]);
  if (!result || result instanceof Error) throw new Error("publish failed");
  const deliveries = [...result.deliveryIds].sort();
  expect(deliveries).toHaveLength(states.length);
  const createdAt = age === "old" ? "now() - interval '2 days'" : "now() - interval '1 hour'";
  await sql(testDb.url, `UPDATE events SET created_at = ${createdAt} WHERE id = $1`, [result.event.id]);
  for (const [i, id] of deliveries.entries()) {
    const state = states[i]!;
    const status = state === "queued" ? "queued" : state === "delivered" ? "delivered" : "failed";
    const next =
      state === "queued" ? "now() - interval '2 days'" : state === "retrying" ? "now() + interval '1 hour'" : "NULL";
    await sql(
      testDb.url,
      `UPDATE deliveries SET status = $2, next_attempt_at = ${next}, attempts = $3, created_at = ${createdAt} WHERE id = $1`,
      [id, status, state === "queued" ? 0 : attempts],
    );
    if (state === "queued") continue;
    await sql(
      testDb.url,
      `INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms)
       SELECT 'att_' || substr($1, 5) || '_' || n, $1, d.subscription_id, n, 'https://example.com', ${createdAt}, 5
       FROM deliveries d, generate_series(1, $2::int) n WHERE d.id = $1`,
      [id, attempts],
    );
  }
  return { event: result.event.id, deliveries };
}

async function ids(table: "events" | "deliveries"): Promise<string[]> {
  return (await sql<{ id: string }>(testDb.url, `SELECT id FROM ${table} ORDER BY id`)).map((row) => row.id);
}
async function attemptsOf(): Promise<string[]> {
  return (
    await sql<{ delivery_id: string }>(
      testDb.url,
      "SELECT DISTINCT delivery_id FROM delivery_attempts ORDER BY delivery_id",
    )
  ).map((row) => row.delivery_id);
}

describe("a pruning pass", () => {
  it("deletes exactly the finished deliveries past retention, their attempts, and the events left without deliveries", async () => {
    const queuedOld = await seed("order.paid", "old", ["queued"]);
    const retryingOld = await seed("order.paid", "old", ["retrying"], 3);
    const finalOld = await seed("order.paid", "old", ["final"], 2);
    const finalNew = await seed("order.paid", "new", ["final"], 2);
    const deliveredOld = await seed("order.paid", "old", ["delivered"]);
    const deliveredNew = await seed("order.paid", "new", ["delivered"]);
    const allGone = await seed("order.both", "old", ["delivered", "final"], 2);
    const someLeft = await seed("order.both", "old", ["delivered", "retrying"]);
    const nothingMatchedOld = await seed("nothing.matched", "old", []);
    const nothingMatchedNew = await seed("nothing.matched", "new", []);

    const pass = await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 1_000 });

    // Deleted: finalOld (2 attempts), deliveredOld (1), allGone's two (2 each), someLeft's delivered one (1).
    expect(pass).toMatchObject({ deliveries: 5, attempts: 8, events: 4, complete: true });
    const survivingDeliveries = [queuedOld, retryingOld, finalNew, deliveredNew]
      .map((s) => s.deliveries[0]!)
      .concat(someLeft.deliveries[1]!);
    expect(await ids("deliveries")).toEqual(survivingDeliveries.sort());
    // Every surviving delivery that had attempts keeps all of them; the deleted ones have none left.
    expect(await attemptsOf()).toEqual(
      [retryingOld, finalNew, deliveredNew]
        .map((s) => s.deliveries[0]!)
        .concat(someLeft.deliveries[1]!)
        .sort(),
    );
    const [retryingAttempts] = await sql<{ count: number }>(
      testDb.url,
      "SELECT count(*)::int AS count FROM delivery_attempts WHERE delivery_id = $1",
      [retryingOld.deliveries[0]],
    );
    expect(retryingAttempts!.count).toBe(3);
    expect(await ids("events")).toEqual(
      [queuedOld, retryingOld, finalNew, deliveredNew, someLeft, nothingMatchedNew].map((s) => s.event).sort(),
    );
    expect(await ids("events")).not.toContain(nothingMatchedOld.event);
    expect(await ids("events")).not.toContain(allGone.event);
    expect(await ids("events")).not.toContain(finalOld.event);
    expect(await ids("events")).not.toContain(deliveredOld.event);

    // A second pass finds nothing more.
    expect(await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 1_000 })).toMatchObject({
      deliveries: 0,
      attempts: 0,
      events: 0,
    });
    // The same rows, once the retry is done and RETENTION is shorter than an hour: the rest goes.
    await sql(testDb.url, "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL WHERE id = ANY($1)", [
      [retryingOld.deliveries[0], someLeft.deliveries[1]],
    ]);
    const later = await pruneExpired({ sql: database.sql }, { retentionMs: 30 * 60_000, batchSize: 1_000 });
    expect(later).toMatchObject({ deliveries: 4, attempts: 3 + 1 + 2 + 1, events: 5 });
    expect(await ids("deliveries")).toEqual([queuedOld.deliveries[0]]);
    expect(await ids("events")).toEqual([queuedOld.event]);
  });

  it("deletes in batches of the given size, each its own statement", async () => {
    for (let i = 0; i < 4; i++) await seed("order.paid", "old", ["delivered"]);
    for (let i = 0; i < 3; i++) await seed("order.paid", "old", ["final"]);
    const kept = await seed("order.paid", "old", ["retrying"]);

    // The verb alone: never more than its limit, and each batch goes on after the last.
    const before = new Date(Date.now() - DAY);
    const first = await pruneFinishedDeliveries({ sql: database.sql }, { status: "delivered", before, limit: 2 });
    expect(first).toMatchObject({ deliveries: 2, attempts: 2, taken: 2 });
    const second = await pruneFinishedDeliveries(
      { sql: database.sql },
      { status: "delivered", before, limit: 2, after: first.last },
    );
    expect(second).toMatchObject({ deliveries: 2, attempts: 2, taken: 2 });
    expect(second.last!.id > first.last!.id).toBe(true);
    expect(
      await pruneFinishedDeliveries(
        { sql: database.sql },
        { status: "delivered", before, limit: 2, after: second.last },
      ),
    ).toMatchObject({ deliveries: 0, taken: 0 });

    // A whole pass with batches of 2, the walks taking turns: an empty batch of delivered ones
    // (gone already) and 2 of the 3 failed ones; the events behind them, 2 by 2 (the 4 of the
    // delivered ones, then the 2 failed ones just deleted, then a page that stops at the third);
    // the last failed one; then the events from there on (the third failed one's and the kept
    // one, the 4 that matched nothing, an empty page). 11 events deleted: all but the kept one.
    for (let i = 0; i < 4; i++) await seed("nothing.matched", "old", []);
    const pass = await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 2 });
    expect(pass).toEqual({
      deliveries: 3,
      attempts: 3,
      events: 4 + 3 + 4,
      payloads: 0,
      credentials: 0,
      // Then one batch of retired credentials: none.
      batches: 2 + 4 + 1 + 4 + 1,
      complete: true,
    });
    expect(await ids("deliveries")).toEqual(kept.deliveries);
    expect(await ids("events")).toEqual([kept.event]);
  });

  it("rests before every batch but the first, as long as the caller asks, and stops after a rest when asked to", async () => {
    for (let i = 0; i < 5; i++) await seed("order.paid", "old", ["delivered"]);
    const rests: number[] = [];
    const pass = await pruneExpired(
      { sql: database.sql },
      { retentionMs: DAY, batchSize: 2, rest: async (lastBatchMs) => void rests.push(lastBatchMs) },
    );
    // Turns: delivered 2 and failed 0, then the 2 events behind them and a page that stops at the
    // third; delivered 2, the next 2 events and a page that stops at the fifth; delivered 1, the
    // fifth event; then one batch of credentials. A rest before each batch but the first.
    expect(pass).toEqual({
      deliveries: 5,
      attempts: 5,
      events: 5,
      payloads: 0,
      credentials: 0,
      batches: 4 + 3 + 2 + 1,
      complete: true,
    });
    expect(rests).toHaveLength(9);
    // Each rest is told how long the batch before it took.
    for (const ms of rests) expect(ms).toBeGreaterThan(0);

    // A stop that comes during a rest is seen before the next batch.
    for (let i = 0; i < 5; i++) await seed("order.paid", "old", ["delivered"]);
    let stopping = false;
    const stopped = await pruneExpired(
      { sql: database.sql },
      {
        retentionMs: DAY,
        batchSize: 2,
        shouldStop: () => stopping,
        rest: async () => {
          stopping = true;
        },
      },
    );
    expect(stopped).toEqual({
      deliveries: 2,
      attempts: 2,
      events: 0,
      payloads: 0,
      credentials: 0,
      batches: 1,
      complete: false,
    });
  });

  it("tells what each batch deleted once it committed, so a pass that fails midway still counts it", async () => {
    for (let i = 0; i < 5; i++) await seed("order.paid", "old", ["delivered"]);
    const told: PrunedRows[] = [];
    let rests = 0;
    const failing = pruneExpired(
      { sql: database.sql },
      {
        retentionMs: DAY,
        batchSize: 2,
        onBatch: (deleted) => void told.push(deleted),
        rest: async () => {
          if (++rests === 3) throw new Error("the connection dropped");
        },
      },
    );
    await expect(failing).rejects.toThrow("the connection dropped");
    // 2 delivered deliveries, no failed one, and the 2 events behind them committed before the failure.
    expect(told).toEqual([
      { deliveries: 2, attempts: 2, events: 0, payloads: 0, credentials: 0 },
      { deliveries: 0, attempts: 0, events: 0, payloads: 0, credentials: 0 },
      { deliveries: 0, attempts: 0, events: 2, payloads: 0, credentials: 0 },
    ]);
    expect(await ids("deliveries")).toHaveLength(3);
    expect(await ids("events")).toHaveLength(3);
  });

  it("stops between two batches when asked to", async () => {
    for (let i = 0; i < 7; i++) await seed("order.paid", "old", ["delivered"]);
    let asked = 0;
    const pass = await pruneExpired(
      { sql: database.sql },
      { retentionMs: DAY, batchSize: 2, shouldStop: () => ++asked > 2 },
    );
    expect(pass).toEqual({
      deliveries: 2,
      attempts: 2,
      events: 0,
      payloads: 0,
      credentials: 0,
      batches: 2,
      complete: false,
    });
    expect(await ids("deliveries")).toHaveLength(5);
    // The next pass goes on.
    expect(await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 2 })).toMatchObject({
      deliveries: 5,
      events: 7,
      complete: true,
    });
  });

  it("deletes events as it goes, not only once every expired delivery is gone", async () => {
    // A pass over a log bigger than one run of the pruner (a worker that stops, a window of the
    // benchmark): the events behind the deliveries already deleted go in the same run.
    for (let i = 0; i < 6; i++) await seed("order.paid", "old", ["delivered"]);
    let asked = 0;
    const pass = await pruneExpired(
      { sql: database.sql },
      { retentionMs: DAY, batchSize: 2, shouldStop: () => ++asked > 3 },
    );
    // Delivered 2, failed 0, then the 2 events whose deliveries those were.
    expect(pass).toEqual({
      deliveries: 2,
      attempts: 2,
      events: 2,
      payloads: 0,
      credentials: 0,
      batches: 3,
      complete: false,
    });
    expect(await ids("events")).toHaveLength(4);
  });
});

describe("a delivery resent while a pass runs", () => {
  it("is skipped while the resend holds it, and kept once it is queued again", async () => {
    const resent = await seed("order.paid", "old", ["delivered"]);
    const untouched = await seed("order.paid", "old", ["delivered"]);
    // POST /v1/deliveries/{id}/retry in flight: its transaction has made the delivery queued, not committed yet.
    const client = new pg.Client({ connectionString: testDb.url });
    await client.connect();
    try {
      await client.query("BEGIN");
      await client.query("UPDATE deliveries SET status = 'queued', next_attempt_at = now() WHERE id = $1", [
        resent.deliveries[0],
      ]);
      // The pass does not wait for it, and does not delete it.
      expect(await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 1_000 })).toMatchObject({
        deliveries: 1,
        events: 1,
        complete: true,
      });
      await client.query("COMMIT");
    } finally {
      await client.end();
    }
    expect(await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 1_000 })).toMatchObject({
      deliveries: 0,
      events: 0,
    });
    expect(await ids("deliveries")).toEqual(resent.deliveries);
    expect(await attemptsOf()).toEqual(resent.deliveries);
    expect(await ids("events")).toEqual([resent.event]);
    expect(await ids("events")).not.toContain(untouched.event);
  });
});

describe("two pruners at once", () => {
  async function seedMany(): Promise<{ keptDeliveries: string[]; keptEvents: string[] }> {
    const kept = [];
    for (let i = 0; i < 30; i++) await seed("order.both", "old", ["delivered", "final"], 2);
    for (let i = 0; i < 10; i++) await seed("nothing.matched", "old", []);
    for (let i = 0; i < 5; i++) kept.push(await seed("order.both", "old", ["delivered", "retrying"]));
    return { keptDeliveries: kept.map((s) => s.deliveries[1]!).sort(), keptEvents: kept.map((s) => s.event).sort() };
  }
  // 30 events with 2 finished deliveries of 2 attempts, 10 without deliveries, 5 with one finished.
  const expected = { deliveries: 60 + 5, attempts: 120 + 5, events: 40 };

  it("without the lock, prune each row once: no error, and the counts add up to the set", async () => {
    const { keptDeliveries, keptEvents } = await seedMany();
    // Small batches on two pools, so that their statements interleave.
    const passes = await Promise.all([
      pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 3 }),
      pruneExpired({ sql: other.sql }, { retentionMs: DAY, batchSize: 3 }),
    ]);
    const total = (key: "deliveries" | "attempts" | "events") => passes[0][key] + passes[1][key];
    expect({ deliveries: total("deliveries"), attempts: total("attempts"), events: total("events") }).toEqual(expected);
    expect(await ids("deliveries")).toEqual(keptDeliveries);
    expect(await ids("events")).toEqual(keptEvents);
  });

  it("with the lock, one prunes while the other skips its turn", async () => {
    const { keptDeliveries, keptEvents } = await seedMany();
    const results = await Promise.all([
      withPrunerLock({ sql: database.sql }, (sql) => pruneExpired({ sql }, { retentionMs: DAY, batchSize: 3 })),
      withPrunerLock({ sql: other.sql }, (sql) => pruneExpired({ sql }, { retentionMs: DAY, batchSize: 3 })),
    ]);
    const ran = results.filter((pass) => pass !== undefined);
    expect(ran.length).toBeGreaterThanOrEqual(1);
    expect({
      deliveries: ran.reduce((sum, pass) => sum + pass.deliveries, 0),
      attempts: ran.reduce((sum, pass) => sum + pass.attempts, 0),
      events: ran.reduce((sum, pass) => sum + pass.events, 0),
    }).toEqual(expected);
    expect(await ids("deliveries")).toEqual(keptDeliveries);
    expect(await ids("events")).toEqual(keptEvents);

    // While one holds the lock, the other does not run at all.
    const inner = await withPrunerLock({ sql: database.sql }, () =>
      withPrunerLock({ sql: other.sql }, async () => "ran"),
    );
    expect(inner).toBeUndefined();
    // And the lock is released after a pass.
    expect(await withPrunerLock({ sql: other.sql }, async () => "ran")).toBe("ran");
  });
});

describe("endpoint credentials", () => {
  const ctx = () => ({
    db: database.prisma,
    scope: UNSCOPED,
    secretBox: new SecretBox(Buffer.alloc(32, 4)),
    destinationPolicy: { allowHttp: true, allowPrivateNetworks: true },
    defaultMaxInFlight: 10,
  });
  const basic = (password: string) => ({ type: "basic" as const, username: "acme", password });
  const credentialRows = async () =>
    sql<{ id: string; retired: boolean }>(
      testDb.url,
      "SELECT id, retired_at IS NOT NULL AS retired FROM endpoint_credentials ORDER BY id",
    );
  const credentialsOf = async (subscriptionId: string) =>
    (
      await sql<{ id: string }>(testDb.url, "SELECT credentials_id AS id FROM subscriptions WHERE id = $1", [
        subscriptionId,
      ])
    )[0]!.id;

  it("deletes those replaced or left by a deleted subscription, once retired a while and no delivery refers to them", async () => {
    const { subscription } = await createSubscription(ctx(), {
      url: "https://example.com/auth",
      events: ["order.auth"],
      auth: basic("first"),
    });
    const first = await credentialsOf(subscription.id);
    const [published] = await publishEvents({ sql: database.sql }, [{ type: "order.auth", data: {} }]);
    if (!published || published instanceof Error) throw new Error("publish failed");
    const [delivery] = published.deliveryIds;
    // Replaced twice: the first row is retired but its delivery refers to it; the second, no one.
    await updateSubscription(ctx(), subscription.id, { auth: basic("second") });
    const second = await credentialsOf(subscription.id);
    await updateSubscription(ctx(), subscription.id, { auth: null });
    expect(await credentialsOf(subscription.id)).toBeNull();
    // Another subscription's current row, and one deleted with its subscription.
    const current = await createSubscription(ctx(), { url: "https://example.com/c", events: ["x"], auth: basic("c") });
    const gone = await createSubscription(ctx(), { url: "https://example.com/g", events: ["x"], auth: basic("g") });
    const goneRow = await credentialsOf(gone.subscription.id);
    await deleteSubscription(ctx(), gone.subscription.id);
    const currentRow = await credentialsOf(current.subscription.id);
    expect(await credentialRows()).toEqual(
      [
        { id: first, retired: true },
        { id: second, retired: true },
        { id: currentRow, retired: false },
        { id: goneRow, retired: true },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );

    // Within the grace nothing goes: a publish that read the old row may still be inserting.
    expect(await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 1 })).toMatchObject({
      credentials: 0,
      complete: true,
    });
    expect(await credentialRows()).toHaveLength(4);

    // After it, the retired rows no delivery refers to go, one a batch; the others stay.
    const pass = await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 1, credentialsGraceMs: 0 });
    expect(pass).toMatchObject({ deliveries: 0, credentials: 2, complete: true });
    expect((await credentialRows()).map((row) => row.id).sort()).toEqual([first, currentRow].sort());

    // Once its last delivery is pruned, the first row goes in the same pass.
    await sql(
      testDb.url,
      "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL, created_at = now() - interval '2 days' WHERE id = $1",
      [delivery],
    );
    const last = await pruneExpired({ sql: database.sql }, { retentionMs: DAY, batchSize: 10, credentialsGraceMs: 0 });
    expect(last).toMatchObject({ deliveries: 1, credentials: 1, complete: true });
    expect(await credentialRows()).toEqual([{ id: currentRow, retired: false }]);
  });
});
