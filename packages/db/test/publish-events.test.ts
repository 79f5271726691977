import { IdempotencyConflictError } from "@webhooks/core";
import {
  createDatabase,
  createSubscription,
  type Database,
  deliveryJobChunks,
  getEvent,
  type PublishResult,
  publishEvents,
  publishTestEvent,
} from "@webhooks/db";
import { describe, expect, it } from "vitest";
import { fileDatabase, subscriptionContext } from "./file-database.ts";

/**
 * publishEvents writes a whole batch of publishes with one lookup and one insert. The API batches
 * whatever arrives together, which a test over HTTP cannot force, so the batch verb is tested here.
 */
const file = fileDatabase();
const ctx = () => ({ sql: file.database.sql });

async function subscribe(events: string[], tenantId: string | null = null): Promise<string> {
  const { subscription } = await createSubscription(subscriptionContext(file.database), {
    url: "https://example.com/hook",
    events,
  });
  // Set directly: the tenant is the subscription's at creation, which this verb's input may not name yet.
  if (tenantId !== null)
    await file.database.sql.query("UPDATE subscriptions SET tenant_id = $2 WHERE id = $1", [subscription.id, tenantId]);
  return subscription.id;
}

/** Each delivery of these events: its event, subscription and tenant, in a stable order. */
async function deliveriesOf(eventIds: string[]) {
  return file.database.sql.query<{ event_id: string; subscription_id: string; tenant_id: string | null }>(
    "SELECT event_id, subscription_id, tenant_id FROM deliveries WHERE event_id = ANY($1::text[]) ORDER BY event_id, subscription_id",
    [eventIds],
  );
}

function ok(result: PublishResult | Error): PublishResult {
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

    const rows = await file.database.sql.query<{ event_id: string; subscription_id: string }>(
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
    const createdRows = await file.database.sql.query<{ id: string }>(
      "SELECT id FROM deliveries WHERE event_id = ANY($1::text[])",
      [createdEvents],
    );
    expect([...created].sort()).toEqual(createdRows.map((row) => row.id).sort());
    expect(results.every((r) => r instanceof Error || r.created || r.deliveryIds.length === 0)).toBe(true);
    const count = await file.database.sql.query<{ n: string }>("SELECT count(*) AS n FROM events", []);
    expect(Number(count[0]!.n)).toBe(5);
  });

  it("never deadlocks two batches that carry the same keys in other orders (a client's retries)", async () => {
    // Before the keys were inserted in order, two such batches each took a key the other then
    // waited for: PostgreSQL broke the deadlock by failing one whole batch, every request of it
    // answered 500, the keyless ones included (seen about once in ten rounds of 100 keys).
    const pool = createDatabase({ databaseUrl: file.url, poolSize: 4 });
    try {
      for (let round = 0; round < 20; round++) {
        const keys = Array.from({ length: 100 }, (_, i) => `retry-${round}-${i}`);
        const batch = (order: string[]) => [
          { type: "b.keyless", data: { round } },
          ...order.map((key) => ({ type: "b.keyed", data: { key }, idempotencyKey: key })),
        ];
        const results = (
          await Promise.all([
            publishEvents({ sql: pool.sql }, batch(keys)),
            publishEvents({ sql: pool.sql }, batch([...keys].reverse())),
          ])
        ).flat();
        expect(results.filter((result) => result instanceof Error)).toEqual([]);
        // Each key made one event, which both batches answered with.
        const keyed = results.map(ok).filter((result) => result.event.type === "b.keyed");
        expect(keyed).toHaveLength(200);
        expect(new Set(keyed.map((result) => result.event.id)).size).toBe(100);
      }
    } finally {
      await pool.close();
    }
  });

  it("answers the batch's committed events as accepted when only the lookup after a key conflict fails", async () => {
    // The second lookup of Idempotency-Keys runs after the insert has committed: its failure is
    // the conflicted input's alone. Before, it failed the whole batch, and the API answered an
    // error for events that were committed (a client retrying without a key would publish twice).
    let lookups = 0;
    const flaky = {
      query: async (text: string, values: unknown[]) => {
        if (text.includes("FROM events WHERE idempotency_key = ANY") && lookups++ > 0)
          throw new Error("Connection terminated unexpectedly");
        return file.database.sql.query(text, values);
      },
    } as unknown as Database["sql"];
    const [keyless, first, second] = await publishEvents({ sql: flaky }, [
      { type: "b.keyless", data: {} },
      { type: "b.keyed", data: {}, idempotencyKey: "same-in-one-batch" },
      { type: "b.keyed", data: {}, idempotencyKey: "same-in-one-batch" },
    ]);
    expect(ok(keyless!).created).toBe(true);
    expect(ok(first!).created).toBe(true);
    expect(second).toBeInstanceOf(Error);
    expect((second as Error).message).toBe("Connection terminated unexpectedly");
    expect(lookups).toBe(2);
  });

  it("delivers an event with a tenant only to that tenant's subscriptions, and one without only to untenanted ones", async () => {
    const type = "t.paid";
    // The earlier tests' "*" subscriptions would get the untenanted event too.
    await file.database.sql.query("UPDATE subscriptions SET active = false", []);
    const plain = await subscribe([type]);
    const plainAll = await subscribe(["*"]);
    const acme = await subscribe([type], "acme");
    const acmeAll = await subscribe(["*"], "acme");
    await subscribe([type], "globex");

    const [forAcme, forNobody, forPlain] = (
      await publishEvents(ctx(), [
        { type, data: {}, tenantId: "acme" },
        { type, data: {}, tenantId: "initech" },
        { type, data: {} },
      ])
    ).map((r) => ok(r!));
    expect(forAcme!.event.tenantId).toBe("acme");
    expect(forPlain!.event.tenantId).toBeNull();
    expect(forNobody!.deliveryCount).toBe(0);

    // Each delivery carries its event's tenant.
    const byEvent = (eventId: string) =>
      deliveriesOf([eventId]).then((rows) =>
        rows.map(({ subscription_id, tenant_id }) => ({ subscription_id, tenant_id })),
      );
    expect(await byEvent(forAcme!.event.id)).toEqual(
      [acme, acmeAll].sort().map((id) => ({ subscription_id: id, tenant_id: "acme" })),
    );
    expect(await byEvent(forPlain!.event.id)).toEqual(
      [plain, plainAll].sort().map((id) => ({ subscription_id: id, tenant_id: null })),
    );
    expect(await getEvent({ db: file.database.prisma }, forAcme!.event.id)).toMatchObject({
      id: forAcme!.event.id,
      tenantId: "acme",
    });
    expect(await getEvent({ db: file.database.prisma }, forPlain!.event.id)).toMatchObject({ tenantId: null });
    for (const id of [acme, acmeAll, plain, plainAll])
      await file.database.sql.query("UPDATE subscriptions SET active = false WHERE id = $1", [id]);
  });

  it("tells an Idempotency-Key reused for another tenant from a retry of the same request", async () => {
    const [first] = await publishEvents(ctx(), [
      { type: "t.key", data: { n: 1 }, tenantId: "acme", idempotencyKey: "tenant-key" },
    ]);
    const [again, otherTenant, noTenant] = await publishEvents(ctx(), [
      { type: "t.key", data: { n: 1 }, tenantId: "acme", idempotencyKey: "tenant-key" },
      { type: "t.key", data: { n: 1 }, tenantId: "globex", idempotencyKey: "tenant-key" },
      { type: "t.key", data: { n: 1 }, idempotencyKey: "tenant-key" },
    ]);
    expect(ok(again!)).toMatchObject({ created: false, event: { id: ok(first!).event.id, tenantId: "acme" } });
    expect(otherTenant).toBeInstanceOf(IdempotencyConflictError);
    expect(noTenant).toBeInstanceOf(IdempotencyConflictError);
  });

  it("gives a test event and its delivery the subscription's tenant", async () => {
    const acme = await subscribe(["t.other"], "acme");
    const plain = await subscribe(["t.other"]);
    const tenanted = await publishTestEvent(ctx(), { subscriptionId: acme, type: "t.test", data: {} });
    const untenanted = await publishTestEvent(ctx(), { subscriptionId: plain, type: "t.test", data: {} });
    expect(tenanted.event.tenantId).toBe("acme");
    expect(untenanted.event.tenantId).toBeNull();
    expect(await deliveriesOf([tenanted.event.id])).toEqual([
      { event_id: tenanted.event.id, subscription_id: acme, tenant_id: "acme" },
    ]);
    expect(await deliveriesOf([untenanted.event.id])).toEqual([
      { event_id: untenanted.event.id, subscription_id: plain, tenant_id: null },
    ]);
    expect(await getEvent({ db: file.database.prisma }, tenanted.event.id)).toMatchObject({ tenantId: "acme" });
  });

  it('matches in SQL as matchesEventType does: the exact type, or "*" for any type but operational ones', async () => {
    await file.database.sql.query("UPDATE subscriptions SET active = false", []);
    const named = await subscribe(["operational.subscription.disabled", "m.other"]);
    const all = await subscribe(["*"]);
    await subscribe(["m"]);
    await subscribe(["m.paid.more"]);
    const [operational, plain] = (
      await publishEvents(ctx(), [
        { type: "operational.subscription.disabled", data: {} },
        { type: "m.paid", data: {} },
      ])
    ).map((r) => ok(r!));
    expect((await deliveriesOf([operational!.event.id])).map((row) => row.subscription_id)).toEqual([named]);
    expect((await deliveriesOf([plain!.event.id])).map((row) => row.subscription_id)).toEqual([all]);
    // Few deliveries come back with the result, numbered in SQL from the event's id block.
    expect(plain!.deliveryIds).toHaveLength(1);
    expect(plain!.deliveryIds[0]!.startsWith(plain!.deliveryIdBlock)).toBe(true);
    expect(plain!.subscriptionOf.get(plain!.deliveryIds[0]!)).toBe(all);
  });

  it("leaves a batch's deliveries to be read in chunks when there are more than returnLimit", async () => {
    await file.database.sql.query("UPDATE subscriptions SET active = false", []);
    const subscribed = [];
    for (let i = 0; i < 5; i++) subscribed.push(await subscribe(["c.many"]));
    const [result] = (await publishEvents(ctx(), [{ type: "c.many", data: {} }], { returnLimit: 4 })).map((r) =>
      ok(r!),
    );
    expect(result).toMatchObject({ deliveryCount: 5, deliveryIds: [] });
    const chunks = [];
    for await (const chunk of deliveryJobChunks(ctx(), result!.deliveryIdBlock, 2)) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.length)).toEqual([2, 2, 1]);
    const rows = await file.database.sql.query<{ id: string; subscription_id: string }>(
      "SELECT id, subscription_id FROM deliveries WHERE event_id = $1 ORDER BY id",
      [result!.event.id],
    );
    expect(chunks.flat()).toEqual(rows.map((row) => ({ deliveryId: row.id, subscriptionId: row.subscription_id })));
    expect(rows.map((row) => row.subscription_id)).toEqual([...subscribed].sort());
  });
});
