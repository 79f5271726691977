import { IdempotencyConflictError, SecretBox } from "@webhooks/core";
import { createDatabase, createSubscription, publishEvents, type Database, type PublishResult } from "@webhooks/db";
import { createTestDatabase, type TestDatabase } from "@webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * publishEvents writes a whole batch of publishes with one lookup and one insert. The API batches
 * whatever arrives together, which a test over HTTP cannot force, so the batch verb is tested here.
 */
let testDb: TestDatabase;
let database: Database;
const ctx = () => ({ sql: database.sql });
const policy = { allowHttp: true, allowPrivateNetworks: true };

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

async function subscribe(events: string[]): Promise<string> {
  const { subscription } = await createSubscription(
    { db: database.prisma, secretBox: new SecretBox(Buffer.alloc(32, 7)), destinationPolicy: policy, defaultMaxInFlight: 10 },
    { url: "https://example.com/hook", events },
  );
  return subscription.id;
}

function ok(result: PublishResult | IdempotencyConflictError): PublishResult {
  if (result instanceof Error) throw result;
  return result;
}

describe("publishEvents", () => {
  it("writes a batch of mixed events, each with its own deliveries and idempotency outcome", async () => {
    const paid = await subscribe(["b.paid"]);
    const all = await subscribe(["*"]);
    const [earlier] = await publishEvents(ctx(), [{ type: "b.paid", data: { n: 0 }, idempotencyKey: "known" }]);

    const results = await publishEvents(ctx(), [
      { type: "b.paid", data: { n: 1 } },
      { type: "b.other", data: { n: 2 } },
      { type: "b.paid", data: { n: 3 }, idempotencyKey: "twice" },
      { type: "b.paid", data: { n: 3 }, idempotencyKey: "twice" },
      { type: "b.paid", data: { n: 4 }, idempotencyKey: "clash" },
      { type: "b.paid", data: { n: 5 }, idempotencyKey: "clash" },
      { type: "b.paid", data: { n: 0 }, idempotencyKey: "known" },
      { type: "b.paid", data: { n: 99 }, idempotencyKey: "known" },
    ]);

    const [one, two, twiceA, twiceB, clashA, clashB, knownSame, knownOther] = results;
    expect(ok(one!)).toMatchObject({ created: true, event: { type: "b.paid", data: { n: 1 } } });
    expect(ok(one!).deliveryIds).toHaveLength(2);
    expect(ok(two!).deliveryIds).toHaveLength(1);
    // The same key and body twice in one batch: one event, and the second gets it back.
    expect(ok(twiceA!).created).toBe(true);
    expect(ok(twiceB!)).toMatchObject({ created: false, event: { id: ok(twiceA!).event.id } });
    // The same key with two bodies in one batch: the first wins, the second is a conflict.
    expect(ok(clashA!).created).toBe(true);
    expect(clashB).toBeInstanceOf(IdempotencyConflictError);
    // A key published in an earlier batch.
    expect(ok(knownSame!)).toMatchObject({ created: false, event: { id: ok(earlier!).event.id } });
    expect(knownOther).toBeInstanceOf(IdempotencyConflictError);

    const rows = await database.sql.query<{ event_id: string; subscription_id: string }>(
      "SELECT event_id, subscription_id FROM deliveries WHERE event_id = ANY($1::text[]) ORDER BY event_id, subscription_id",
      [[ok(one!).event.id, ok(two!).event.id, ok(twiceA!).event.id]],
    );
    expect(rows).toEqual(
      [
        { event_id: ok(one!).event.id, subscription_id: paid },
        { event_id: ok(one!).event.id, subscription_id: all },
        { event_id: ok(two!).event.id, subscription_id: all },
        { event_id: ok(twiceA!).event.id, subscription_id: paid },
        { event_id: ok(twiceA!).event.id, subscription_id: all },
      ].sort((a, b) => (a.event_id + a.subscription_id < b.event_id + b.subscription_id ? -1 : 1)),
    );
    // The caller enqueues the returned deliveries: those of the events this batch created, each
    // once; a replay returns none.
    const created = results.flatMap((r) => (r instanceof Error || !r.created ? [] : r.deliveryIds));
    const createdEvents = results.flatMap((r) => (r instanceof Error || !r.created ? [] : [r.event.id]));
    const createdRows = await database.sql.query<{ id: string }>("SELECT id FROM deliveries WHERE event_id = ANY($1::text[])", [createdEvents]);
    expect([...created].sort()).toEqual(createdRows.map((row) => row.id).sort());
    expect(results.every((r) => r instanceof Error || r.created || r.deliveryIds.length === 0)).toBe(true);
    const count = await database.sql.query<{ n: string }>("SELECT count(*) AS n FROM events", []);
    expect(Number(count[0]!.n)).toBe(5);
  });
});
