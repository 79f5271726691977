import { publish, subscribe, type TestApi } from "@webhooks/api/testing";
import { payloadFilterJsonPathOf } from "@webhooks/core";
import { createApiKey } from "@webhooks/db";
import { sql, type TestDatabase, type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliverySchema } from "../src/deliveries/schemas.ts";
import { subscriptionListSchema, subscriptionSchema } from "../src/subscriptions/schemas.ts";
import { deliveringApiTest } from "./fixtures.ts";

/**
 * Payload filters through the API (docs/api.md#payload-filters), with a worker delivering to a
 * real receiver: an event that matches a subscription's `events` but not its `filter` gets no
 * delivery for it; filters are checked when saved; a change applies to events published after it.
 */
const test = deliveringApiTest();

/** How many deliveries each subscription got, read from the database right after publishing. */
async function deliveryCounts(database: TestDatabase, subscriptionIds: string[]): Promise<number[]> {
  const rows = await sql<{ subscription_id: string; count: number }>(
    database.url,
    "SELECT subscription_id, count(*)::int AS count FROM deliveries WHERE subscription_id = ANY($1::text[]) GROUP BY 1",
    [subscriptionIds],
  );
  const counts = new Map(rows.map((row) => [row.subscription_id, row.count]));
  return subscriptionIds.map((id) => counts.get(id) ?? 0);
}

/**
 * The `n` of each event the receiver got at `path`, once each, in order. Delivery is at least
 * once (a retry on a loaded machine may bring an event twice); these tests are about which events
 * a filter lets through.
 */
const numbersAt = (receiver: TestReceiver, path: string) =>
  [
    ...new Set(
      receiver.received.filter((webhook) => webhook.path === path).map((webhook) => webhook.json.data.n as number),
    ),
  ].sort((a, b) => a - b);

async function filtered(api: TestApi, receiver: TestReceiver, path: string, filter: unknown, events = ["*"]) {
  return subscribe(api, { url: `${receiver.url}${path}`, events, filter: filter as Record<string, never> });
}

describe("a subscription's filter", () => {
  test("is returned on every read, null by default", async ({ api, receiver }) => {
    const filter = { data: { amount: { $gte: 100 } } };
    const created = await filtered(api, receiver, "/returned", filter);
    expect(created.filter).toEqual(filter);
    expect((await subscribe(api, {})).filter).toBeNull();
    const read = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(read.body.filter).toEqual(filter);
    const list = await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema });
    expect(list.body.data.find((sub) => sub.id === created.id)?.filter).toEqual(filter);
  });

  // Each filter, and the events (by n) it lets through out of those published below.
  const events: { type: string; data: Record<string, unknown> }[] = [
    { type: "invoice.paid", data: { n: 0, amount: 50, currency: "usd", customer: { country: "FR" } } },
    { type: "invoice.paid", data: { n: 1, amount: 150, currency: "eur", customer: { country: "DE", vip: true } } },
    { type: "invoice.paid", data: { n: 2, amount: "150", tags: ["a", "b"], paid_at: "2026-03-01T10:00:00+02:00" } },
    { type: "invoice.failed", data: { n: 3, amount: 1000, tags: ["b", "a"], paid_at: "2026-03-01T09:00:00Z" } },
    { type: "customer.created", data: { n: 4, customer: [{ country: "FR" }], email: "ann@example.com" } },
  ];
  const cases: [string, unknown, number[]][] = [
    ["equality, nested objects nesting", { data: { customer: { country: "FR" } } }, [0]],
    ["a field inside an array is not looked for", { data: { customer: { country: { $exists: true } } } }, [0, 1]],
    ["number comparisons, which strings do not meet", { data: { amount: { $gt: 100, $lte: 1000 } } }, [1, 3]],
    ["equality of the whole array", { data: { tags: ["a", "b"] } }, [2]],
    ["ISO 8601 instants", { data: { paid_at: { $lt: "2026-03-01T08:30:00Z" } } }, [2]],
    ["$in and $nin", { data: { currency: { $in: ["eur", "gbp"] } } }, [1]],
    ["$nin matches a missing field", { data: { currency: { $nin: ["usd"] } } }, [1, 2, 3, 4]],
    ["$neq matches a missing field", { data: { amount: { $neq: 50 } } }, [1, 2, 3, 4]],
    ["$exists: false", { data: { amount: { $exists: false } } }, [4]],
    ["$startsWith, on the type", { type: { $startsWith: "invoice." } }, [0, 1, 2, 3]],
    ["$startsWith, on data", { data: { email: { $startsWith: "ann@" } } }, [4]],
    [
      "$and, $or and $not",
      {
        $or: [
          { type: "invoice.failed" },
          { data: { $and: [{ amount: { $gte: 100 } }, { $not: { currency: "eur" } }] } },
        ],
      },
      [3],
    ],
    ["{} matches everything", {}, [0, 1, 2, 3, 4]],
  ];

  test("creates a delivery only for the events it matches, among those its events match", async ({
    api,
    database,
    receiver,
  }) => {
    const subs = [];
    for (const [i, [, filter]] of cases.entries()) subs.push(await filtered(api, receiver, `/case-${i}`, filter));
    // `events` still applies: this one matches invoices only, and its filter then picks among them.
    const narrowed = await filtered(api, receiver, "/narrowed", { data: { amount: { $gte: 100 } } }, ["invoice.paid"]);
    for (const event of events) await publish(api, event);

    // The deliveries are made with the event: their count is final once the publishes answered.
    const expected = [...cases.map(([, , ns]) => ns.length), 1];
    expect(await deliveryCounts(database, [...subs.map((sub) => sub.id), narrowed.id])).toEqual(expected);
    const arrived = () => cases.every(([, , ns], i) => numbersAt(receiver, `/case-${i}`).length >= ns.length);
    await waitFor(() => arrived() && numbersAt(receiver, "/narrowed").length >= 1, { what: "every delivery" });
    for (const [i, [name, , ns]] of cases.entries()) expect(numbersAt(receiver, `/case-${i}`), name).toEqual(ns);
    expect(numbersAt(receiver, "/narrowed")).toEqual([1]);
  });

  test("a change applies to events published after it; deliveries made before keep going", async ({
    api,
    database,
    receiver,
  }) => {
    const sub = await filtered(api, receiver, "/changed", { data: { n: 1 } });
    await publish(api, { type: "change.test", data: { n: 1 } });
    await publish(api, { type: "change.test", data: { n: 2 } });
    const updated = await api.put(`/v1/subscriptions/${sub.id}`, { filter: { data: { n: 2 } } }, 200, {
      schema: subscriptionSchema,
    });
    expect(updated.body.filter).toEqual({ data: { n: 2 } });
    await publish(api, { type: "change.test", data: { n: 1 } });
    await publish(api, { type: "change.test", data: { n: 2 } });
    // A PUT without `filter` keeps it.
    await api.put(`/v1/subscriptions/${sub.id}`, { description: undefined, max_in_flight: 5 }, 200, {
      schema: subscriptionSchema,
    });
    await publish(api, { type: "change.test", data: { n: 3 } });
    expect(await deliveryCounts(database, [sub.id])).toEqual([2]);
    // null removes it.
    const cleared = await api.put(`/v1/subscriptions/${sub.id}`, { filter: null }, 200, { schema: subscriptionSchema });
    expect(cleared.body.filter).toBeNull();
    await publish(api, { type: "change.test", data: { n: 4 } });

    await waitFor(() => numbersAt(receiver, "/changed").length >= 3, { what: "three deliveries" });
    expect(numbersAt(receiver, "/changed")).toEqual([1, 2, 4]);
  });

  test("does not stop a test event, which goes to its subscription whatever its events and filter", async ({
    api,
    receiver,
  }) => {
    const sub = await filtered(api, receiver, "/tested", { type: "never.this" });
    await api.post(`/v1/subscriptions/${sub.id}/test`, {}, 202, { schema: deliverySchema });
    await waitFor(() => receiver.received.some((webhook) => webhook.path === "/tested"), { what: "the test event" });
  });

  test("works on a tenant's subscriptions, set with its own credential", async ({ api, database, receiver }) => {
    const { key } = await createApiKey({ db: api.db }, { name: "acme", tenantId: "acme" });
    const sub = await subscribe(
      api,
      { url: `${receiver.url}/tenant`, events: ["*"], filter: { data: { plan: "pro" } } },
      { key },
    );
    await publish(api, { type: "tenant.event", tenant_id: "acme", data: { n: 1, plan: "pro" } });
    await publish(api, { type: "tenant.event", tenant_id: "acme", data: { n: 2, plan: "free" } });
    expect(await deliveryCounts(database, [sub.id])).toEqual([1]);
    await waitFor(() => numbersAt(receiver, "/tenant").length >= 1, { what: "the tenant's delivery" });
    expect(numbersAt(receiver, "/tenant")).toEqual([1]);
  });

  test("holds in a fan-out: of 1,000 subscriptions with filters, those that match get the event", async ({
    api,
    database,
  }) => {
    const template = await subscribe(api, {
      url: "https://example.com/fan",
      events: ["fan.filtered"],
      filter: { data: { region: "eu" } },
    });
    // Copies written in one statement, half of them with a filter that refuses the event.
    await sql(
      database.url,
      `INSERT INTO subscriptions (id, url, events, active, secret_id, max_in_flight, headers, filter, filter_path)
       SELECT 'sub_' || upper(substr(md5(random()::text), 1, 26)), s.url, s.events, s.active, s.secret_id, s.max_in_flight, s.headers,
              CASE WHEN g % 2 = 0 THEN s.filter ELSE '{"data": {"region": "us"}}' END,
              CASE WHEN g % 2 = 0 THEN s.filter_path ELSE $2::jsonpath END
       FROM subscriptions s, generate_series(1, 999) AS g WHERE s.id = $1`,
      [template.id, payloadFilterJsonPathOf({ data: { region: "us" } })],
    );
    const event = await publish(api, { type: "fan.filtered", data: { region: "eu" } });
    const [row] = await sql<{ count: number }>(
      database.url,
      "SELECT count(*)::int AS count FROM deliveries WHERE event_id = $1 AND url = 'https://example.com/fan'",
      [event.id],
    );
    // The template and the 499 even copies.
    expect(row!.count).toBe(500);
  });
});

describe("an invalid filter", () => {
  let deep: unknown = { n: 1 };
  for (let i = 0; i < 9; i++) deep = { x: deep };

  const cases: [string, unknown, string][] = [
    ["an unknown operator", { data: { n: { $regex: "a" } } }, "filter.data.n.$regex is not an operator"],
    ["a wrong operand type", { data: { n: { $gt: "soon" } } }, "filter.data.n.$gt must be a number or an ISO 8601"],
    ["a wrong operand type for $in", { data: { n: { $in: "a" } } }, "filter.data.n.$in must be a non-empty array"],
    ["an unknown top-level field", { tenant_id: "a" }, "filter.tenant_id is not a field of what filters match"],
    ["nesting deeper than 10 levels", { data: deep }, "is nested deeper than 10 levels"],
    [
      "over 4 KiB",
      { data: { s: { $in: Array.from({ length: 800 }, (_, i) => `v${i}`) } } },
      "filter must be at most 4096 bytes of JSON",
    ],
    ["a value that is not an object", ["a"], "filter must be a JSON object, or null for none"],
  ];

  test.for(cases)(
    "is a 400 on filter naming the place, on create and on update: %s",
    async ([, filter, message], { api }) => {
      const created = await api.post("/v1/subscriptions", { url: "https://example.com/f", events: ["*"], filter }, 400);
      expect(created.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "parameter_invalid",
        param: "filter",
      });
      expect(created.body.error.message).toContain(message);
      const sub = await subscribe(api, {});
      const updated = await api.put(`/v1/subscriptions/${sub.id}`, { filter }, 400);
      expect(updated.body.error).toMatchObject({ code: "parameter_invalid", param: "filter" });
      expect(updated.body.error.message).toContain(message);
      expect(
        (await api.get(`/v1/subscriptions/${sub.id}`, 200, { schema: subscriptionSchema })).body.filter,
      ).toBeNull();
    },
  );

  test("names the path, for one 11 levels deep", async ({ api }) => {
    const response = await api.post(
      "/v1/subscriptions",
      { url: "https://example.com/f", events: ["*"], filter: { data: deep } },
      400,
    );
    expect(response.body.error.message).toBe(`filter.data${".x".repeat(9)} is nested deeper than 10 levels`);
  });
});
