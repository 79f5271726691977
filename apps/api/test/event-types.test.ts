import { publish, startTestApi, subscribe, type TestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { createApiKey } from "@webhooks/db";
import { sql, type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliveryListSchema, deliverySchema } from "../src/deliveries/schemas.ts";
import {
  type CreateEventTypeRequest,
  eventTypeListSchema,
  eventTypeSchema,
  type UpdateEventTypeRequest,
} from "../src/event-types/schemas.ts";
import { eventSchema } from "../src/events/schemas.ts";
import { portalSessionSchema } from "../src/portal-sessions/schemas.ts";
import { deliveringApiTest } from "./fixtures.ts";

/**
 * The event-type catalog through the API (docs/api.md#event-types): the resource and its list,
 * who may change it, the schemas of `data` checked on publish with a worker delivering to a real
 * receiver, changes reaching a second API process, and EVENT_TYPES_STRICT.
 */
const test = deliveringApiTest().extend(
  "tenantKeys",
  { scope: "file" },
  async ({ api }): Promise<{ key: string; session: string }> => {
    const { key } = await createApiKey({ db: api.db }, { name: "acme", tenantId: "acme" });
    const session = await api.post("/v1/portal_sessions", { tenant_id: "acme" }, 201, { schema: portalSessionSchema });
    return { key, session: session.body.token };
  },
);

const invoiceSchema = {
  type: "object",
  properties: {
    invoice_id: { type: "string" },
    amount: { type: "integer", minimum: 0 },
    currency: { enum: ["usd", "eur"] },
    paid_at: { type: "string", format: "date-time" },
  },
  required: ["invoice_id", "amount", "currency"],
};

async function createType(api: TestApi, body: CreateEventTypeRequest) {
  return (await api.post("/v1/event-types", body, 201, { schema: eventTypeSchema })).body;
}

async function updateType(api: TestApi, name: string, body: UpdateEventTypeRequest) {
  return (await api.put(`/v1/event-types/${name}`, body, 200, { schema: eventTypeSchema })).body;
}

async function eventCount(database: { url: string }, type: string): Promise<number> {
  const [row] = await sql<{ count: number }>(
    database.url,
    "SELECT count(*)::int AS count FROM events WHERE type = $1",
    [type],
  );
  return row!.count;
}

/** The webhooks the receiver got at `path`, by their data. */
const receivedAt = (receiver: TestReceiver, path: string) =>
  receiver.received.filter((webhook) => webhook.path === path).map((webhook) => webhook.json.data);

describe("the event-type resource", () => {
  test("POST creates it with defaults; a second POST of the name is a 409", async ({ api }) => {
    const before = Date.now();
    const created = await createType(api, { name: "customer.created" });
    expect(created).toEqual({
      object: "event_type",
      name: "customer.created",
      description: "",
      schema: null,
      examples: [],
      deprecated: false,
      archived: false,
      created_at: expect.any(String),
      updated_at: created.created_at,
    });
    expect(Date.parse(created.created_at)).toBeGreaterThanOrEqual(before - 1_000);

    const again = await api.post("/v1/event-types", { name: "customer.created", description: "other" }, 409);
    expect(again.body.error).toMatchObject({
      type: "invalid_request_error",
      code: "resource_already_exists",
      param: "name",
    });
    const full = await createType(api, {
      name: "invoice.paid",
      description: "An invoice was paid in full.",
      schema: invoiceSchema,
      examples: [{ invoice_id: "in_1", amount: 4200, currency: "usd" }],
    });
    expect(full).toMatchObject({ description: "An invoice was paid in full.", schema: invoiceSchema });
    expect((await api.get("/v1/event-types/invoice.paid", 200, { schema: eventTypeSchema })).body).toEqual(full);
  });

  test.for<[string, unknown, string, string]>([
    ["a name with a space", { name: "a b" }, "name", "name must contain only letters, digits and _ - . :"],
    ["an operational name", { name: "operational.thing" }, "name", 'name must not start with "operational."'],
    ["a schema that is not an object", { name: "x.a", schema: [] }, "schema", "schema must be a JSON object"],
    [
      "an invalid schema",
      { name: "x.b", schema: { type: "objectx" } },
      "schema",
      "schema is not a valid JSON Schema: schema/type must be equal to one of the allowed values",
    ],
    [
      "a schema of another draft",
      { name: "x.c", schema: { $schema: "http://json-schema.org/draft-07/schema#" } },
      "schema",
      "schema $schema must be https://json-schema.org/draft/2020-12/schema",
    ],
    [
      "a schema with an unknown format",
      { name: "x.d", schema: { properties: { a: { format: "colour" } } } },
      "schema",
      'schema unknown format "colour"',
    ],
    [
      "a schema with a remote $ref",
      { name: "x.e", schema: { $ref: "https://example.com/s.json" } },
      "schema",
      "schema cannot be compiled: can't resolve reference",
    ],
    [
      "six examples",
      { name: "x.f", examples: [{}, {}, {}, {}, {}, {}] },
      "examples",
      "examples must hold at most 5 payloads",
    ],
    ["an example that is not an object", { name: "x.g", examples: [{}, 1] }, "examples[1]", "must be a JSON object"],
    [
      "an example the schema refuses",
      {
        name: "x.h",
        schema: invoiceSchema,
        examples: [{ invoice_id: "a", amount: 1, currency: "usd" }, { amount: 1.5 }],
      },
      "examples[1]",
      "examples[1] does not match the schema: /invoice_id: is required",
    ],
    ["an unknown field", { name: "x.i", deprecated: true }, "deprecated", "Received unknown parameter: deprecated"],
  ])("POST refuses %s with a 400 naming it", async ([, body, param, message], { api }) => {
    const response = await api.post("/v1/event-types", body, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param });
    expect(response.body.error.message).toContain(message);
  });

  test("GET of a name not in the catalog is a 404", async ({ api }) => {
    const response = await api.get("/v1/event-types/no.such.type", 404);
    expect(response.body.error).toMatchObject({ code: "resource_missing", param: "name" });
    expect((await api.get("/v1/event-types/not%20a%20name", 404)).body.error.code).toBe("resource_missing");
  });

  test("PUT changes only what it is sent; name and archived cannot be changed", async ({ api }) => {
    const created = await createType(api, { name: "order.shipped", description: "Shipped.", schema: invoiceSchema });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const updated = await updateType(api, "order.shipped", { deprecated: true });
    expect(updated).toEqual({ ...created, deprecated: true, updated_at: expect.any(String) });
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(created.updated_at));

    const described = await updateType(api, "order.shipped", { description: "On its way." });
    expect(described).toMatchObject({ description: "On its way.", deprecated: true, schema: invoiceSchema });
    expect((await updateType(api, "order.shipped", { schema: null })).schema).toBeNull();

    for (const field of ["name", "archived"]) {
      const response = await api.put("/v1/event-types/order.shipped", { [field]: "x" }, 400);
      expect(response.body.error).toMatchObject({ code: "parameter_not_updatable", param: field });
    }
    expect((await api.put("/v1/event-types/no.such.type", { description: "x" }, 404)).body.error.code).toBe(
      "resource_missing",
    );
  });

  test("PUT refuses a schema that the stored examples break, unless new examples come with it", async ({ api }) => {
    await createType(api, {
      name: "refund.created",
      schema: { type: "object" },
      examples: [{ amount: "12" }],
    });
    const strict = { type: "object", properties: { amount: { type: "integer" } } };
    const refused = await api.put("/v1/event-types/refund.created", { schema: strict }, 400);
    expect(refused.body.error).toMatchObject({ code: "parameter_invalid", param: "schema" });
    expect(refused.body.error.message).toContain(
      "schema does not accept the stored examples[0] (/amount: must be integer)",
    );

    const both = await updateType(api, "refund.created", { schema: strict, examples: [{ amount: 12 }] });
    expect(both).toMatchObject({ schema: strict, examples: [{ amount: 12 }] });

    // New examples alone are checked against the stored schema.
    const bad = await api.put("/v1/event-types/refund.created", { examples: [{ amount: 1 }, { amount: 1.5 }] }, 400);
    expect(bad.body.error).toMatchObject({ param: "examples[1]" });
    expect(bad.body.error.message).toBe("examples[1] does not match the schema: /amount: must be integer");
  });

  test("DELETE archives: the entry stays readable and its name taken, and archiving again changes nothing", async ({
    api,
  }) => {
    const created = await createType(api, { name: "legacy.thing" });
    const archived = (await api.delete("/v1/event-types/legacy.thing", 200, { schema: eventTypeSchema })).body;
    expect(archived).toEqual({ ...created, archived: true, updated_at: expect.any(String) });
    const again = (await api.delete("/v1/event-types/legacy.thing", 200, { schema: eventTypeSchema })).body;
    expect(again).toEqual(archived);
    expect((await api.get("/v1/event-types/legacy.thing", 200, { schema: eventTypeSchema })).body).toEqual(archived);
    expect((await api.post("/v1/event-types", { name: "legacy.thing" }, 409)).body.error.code).toBe(
      "resource_already_exists",
    );
    expect((await api.delete("/v1/event-types/no.such.type", 404)).body.error.code).toBe("resource_missing");
  });

  test("tenant-scoped credentials read the catalog and cannot change it", async ({ api, tenantKeys }) => {
    await createType(api, { name: "tenant.visible" });
    for (const key of [tenantKeys.key, tenantKeys.session]) {
      const list = await api.get("/v1/event-types?limit=100", 200, { key, schema: eventTypeListSchema });
      expect(list.body.data.map((type) => type.name)).toContain("tenant.visible");
      await api.get("/v1/event-types/tenant.visible", 200, { key, schema: eventTypeSchema });
      for (const response of [
        await api.post("/v1/event-types", { name: "tenant.own" }, 403, { key }),
        await api.put("/v1/event-types/tenant.visible", { description: "mine" }, 403, { key }),
        await api.delete("/v1/event-types/tenant.visible", 403, { key }),
      ]) {
        expect(response.body.error).toMatchObject({ type: "permission_error", code: "permission_denied" });
      }
    }
    expect((await api.get("/v1/event-types/tenant.visible", 200, { schema: eventTypeSchema })).body).toMatchObject({
      description: "",
      archived: false,
    });
  });
});

describe("the list", () => {
  test("is by name, byte order, paged with starting_after; archived types only when asked for", async ({ api }) => {
    const names = ["list.b", "list.a", "list.C", "list.a_2", "list.a.1", "list.z"];
    for (const name of names) await createType(api, { name });
    await api.delete("/v1/event-types/list.z", 200, { schema: eventTypeSchema });

    const all = await api.get("/v1/event-types?limit=100", 200, { schema: eventTypeListSchema });
    const listed = all.body.data.map((type) => type.name).filter((name) => name.startsWith("list."));
    expect(listed).toEqual(["list.C", "list.a", "list.a.1", "list.a_2", "list.b"]);
    expect(all.body).toMatchObject({ object: "list", url: "/v1/event-types", has_more: false });

    const pages: string[] = [];
    let after = "list.";
    for (;;) {
      const page = await api.get(`/v1/event-types?limit=2&starting_after=${after}`, 200, {
        schema: eventTypeListSchema,
      });
      pages.push(...page.body.data.map((type) => type.name).filter((name) => name.startsWith("list.")));
      if (!page.body.has_more) break;
      expect(page.body.data).toHaveLength(2);
      after = page.body.data[1]!.name;
    }
    expect(pages).toEqual(["list.C", "list.a", "list.a.1", "list.a_2", "list.b"]);

    const withArchived = await api.get("/v1/event-types?limit=100&include_archived=true", 200, {
      schema: eventTypeListSchema,
    });
    const archived = withArchived.body.data.find((type) => type.name === "list.z");
    expect(archived).toMatchObject({ archived: true });
  });

  test.for<[string, string]>([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["include_archived=yes", "include_archived"],
    ["starting_after=a%20b", "starting_after"],
    ["ending_before=list.a", "ending_before"],
  ])("refuses %s with a 400 naming the parameter", async ([query, param], { api }) => {
    expect((await api.get(`/v1/event-types?${query}`, 400)).body.error.param).toBe(param);
  });
});

describe("publishing an event whose type has a schema", () => {
  test("delivers data that matches; refuses data that does not with a 422 naming the JSON pointer, storing nothing", async ({
    api,
    database,
    receiver,
  }) => {
    await createType(api, { name: "charge.succeeded", schema: invoiceSchema });
    await subscribe(api, { url: `${receiver.url}/charges`, events: ["charge.succeeded"] });
    const good = { invoice_id: "in_1", amount: 100, currency: "usd", paid_at: "2026-01-01T00:00:00Z" };
    await publish(api, { type: "charge.succeeded", data: good });

    for (const [data, message] of [
      [{ invoice_id: "in_2", amount: 1.5, currency: "usd" }, "/amount: must be integer"],
      [{ invoice_id: "in_3", amount: 1 }, "/currency: is required"],
      [{ invoice_id: "in_4", amount: -1, currency: "usd" }, "/amount: must be >= 0"],
      [{ invoice_id: "in_5", amount: 1, currency: "usd", paid_at: "soon" }, '/paid_at: must match format "date-time"'],
    ] as const) {
      const refused = await api.post("/v1/events", { type: "charge.succeeded", data }, 422);
      expect(refused.body.error).toEqual({
        type: "invalid_request_error",
        code: "payload_invalid",
        param: "data",
        message: `data does not match the schema of event type charge.succeeded: ${message}`,
        request_id: expect.any(String),
      });
    }
    // A type outside the catalog publishes as before.
    await publish(api, { type: "charge.other", data: { anything: true } });

    await waitFor(() => receivedAt(receiver, "/charges").length >= 1, { what: "the valid event" });
    expect(await eventCount(database, "charge.succeeded")).toBe(1);
    const deliveries = await api.get("/v1/deliveries?event=charge.succeeded", 200, { schema: deliveryListSchema });
    expect(deliveries.body.data).toHaveLength(1);
    // The refused ones were never stored, so never sent.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receivedAt(receiver, "/charges")).toEqual([good]);
  });

  test("a deprecated type still publishes; a schema set to null checks nothing", async ({ api, receiver }) => {
    await createType(api, { name: "plan.changed", schema: invoiceSchema });
    await subscribe(api, { url: `${receiver.url}/plans`, events: ["plan.changed"] });
    await updateType(api, "plan.changed", { deprecated: true });
    await publish(api, { type: "plan.changed", data: { invoice_id: "a", amount: 1, currency: "eur" } });
    expect((await api.post("/v1/events", { type: "plan.changed", data: { n: 1 } }, 422)).body.error.code).toBe(
      "payload_invalid",
    );
    await updateType(api, "plan.changed", { schema: null });
    await publish(api, { type: "plan.changed", data: { n: 1 } });
    await waitFor(() => receivedAt(receiver, "/plans").length >= 2, { what: "both events" });
    expect(receivedAt(receiver, "/plans")).toEqual(
      expect.arrayContaining([{ invoice_id: "a", amount: 1, currency: "eur" }, { n: 1 }]),
    );
  });

  test("a retry with the Idempotency-Key of an accepted event gets it, even once the schema would refuse it", async ({
    api,
  }) => {
    await createType(api, { name: "payout.sent", schema: { type: "object" } });
    const headers = { "Idempotency-Key": "payout-1" };
    const first = await api.post("/v1/events", { type: "payout.sent", data: { amount: "1" } }, 202, {
      headers,
      schema: eventSchema,
    });
    await updateType(api, "payout.sent", { schema: { properties: { amount: { type: "integer" } } } });
    const retried = await api.post("/v1/events", { type: "payout.sent", data: { amount: "1" } }, 202, {
      headers,
      schema: eventSchema,
    });
    expect(retried.headers["idempotent-replayed"]).toBe("true");
    expect(retried.body).toEqual(first.body);
    // Without the key, the same data is refused.
    expect((await api.post("/v1/events", { type: "payout.sent", data: { amount: "1" } }, 422)).status).toBe(422);
  });

  test("a test event must match its type's schema too", async ({ api }) => {
    await createType(api, { name: "probe.sent", schema: { required: ["id"] } });
    const sub = await subscribe(api, { url: "https://example.com/probe", events: ["probe.sent"] });
    const refused = await api.post(`/v1/subscriptions/${sub.id}/test`, { type: "probe.sent", data: {} }, 422);
    expect(refused.body.error).toMatchObject({ code: "payload_invalid", param: "data" });
    expect(refused.body.error.message).toContain("/id: is required");
    await api.post(`/v1/subscriptions/${sub.id}/test`, { type: "probe.sent", data: { id: 1 } }, 202, {
      schema: deliverySchema,
    });
  });
});

describe("a catalog change reaches every API process", () => {
  test("an API process that checked events against a schema follows its change through another process at once", async ({
    api,
    env,
    receiver,
    onTestFinished,
  }) => {
    const other = await startTestApi(loadConfig(env));
    onTestFinished(() => other.close());
    await subscribe(api, { url: `${receiver.url}/shared`, events: ["shared.type"] });

    // `other` learns that the type is not in the catalog, then that it has this schema.
    await publish(other, { type: "shared.type", data: { v: "no catalog" } });
    await createType(api, { name: "shared.type", schema: { properties: { v: { type: "integer" } } } });
    expect((await other.post("/v1/events", { type: "shared.type", data: { v: "now refused" } }, 422)).status).toBe(422);
    await publish(other, { type: "shared.type", data: { v: 1 } });

    // A stricter schema: `other`'s compiled one would accept this.
    await updateType(api, "shared.type", { schema: { properties: { v: { type: "integer", minimum: 10 } } } });
    const refused = await other.post("/v1/events", { type: "shared.type", data: { v: 2 } }, 422);
    expect(refused.body.error.message).toContain("/v: must be >= 10");
    // A looser one: `other`'s would refuse this.
    await updateType(api, "shared.type", { schema: { properties: { v: { type: "string" } } } });
    await publish(other, { type: "shared.type", data: { v: "accepted again" } });

    await waitFor(() => receivedAt(receiver, "/shared").length >= 3, { what: "the three accepted events" });
    expect(receivedAt(receiver, "/shared").sort((a, b) => String(a.v).localeCompare(String(b.v)))).toEqual([
      { v: 1 },
      { v: "accepted again" },
      { v: "no catalog" },
    ]);
  });
});

describe("EVENT_TYPES_STRICT", () => {
  test("refuses publishing a type not in the catalog or archived, and subscribing to one", async ({
    api,
    env,
    receiver,
    onTestFinished,
  }) => {
    const strict = await startTestApi(loadConfig({ ...env, EVENT_TYPES_STRICT: "true" }));
    onTestFinished(() => strict.close());
    await createType(strict, { name: "strict.known" });
    await createType(strict, { name: "strict.old" });
    await updateType(strict, "strict.old", { deprecated: true });
    await createType(strict, { name: "strict.gone" });
    await strict.delete("/v1/event-types/strict.gone", 200, { schema: eventTypeSchema });

    const unknown = await strict.post("/v1/events", { type: "strict.unknown", data: {} }, 400);
    expect(unknown.body.error).toMatchObject({
      type: "invalid_request_error",
      code: "unknown_event_type",
      param: "type",
    });
    expect(unknown.body.error.message).toContain("strict.unknown is not in the event-type catalog");
    const archived = await strict.post("/v1/events", { type: "strict.gone", data: {} }, 400);
    expect(archived.body.error).toMatchObject({ code: "unknown_event_type", param: "type" });
    expect(archived.body.error.message).toContain("strict.gone is archived");

    const refusedSub = await strict.post(
      "/v1/subscriptions",
      { url: `${receiver.url}/strict`, events: ["strict.known", "strict.unknown", "strict.gone"] },
      400,
    );
    expect(refusedSub.body.error).toMatchObject({ code: "unknown_event_type", param: "events" });
    expect(refusedSub.body.error.message).toContain("strict.unknown, strict.gone");

    // "*", the catalog's types (deprecated ones too) and the service's operational types are fine.
    const sub = await subscribe(strict, {
      url: `${receiver.url}/strict`,
      events: ["strict.known", "strict.old", "operational.subscription.disabled"],
    });
    await subscribe(strict, { url: `${receiver.url}/strict-all`, events: ["*"] });
    const badUpdate = await strict.put(`/v1/subscriptions/${sub.id}`, { events: ["strict.unknown"] }, 400);
    expect(badUpdate.body.error).toMatchObject({ code: "unknown_event_type", param: "events" });
    expect(
      (await strict.post("/v1/subscriptions", { url: `${receiver.url}/x`, events: ["operational.nothing"] }, 400)).body
        .error.code,
    ).toBe("unknown_event_type");

    await publish(strict, { type: "strict.known", data: { n: 1 } });
    await publish(strict, { type: "strict.old", data: { n: 2 } });
    // Test events are not refused (their default type is in no catalog).
    await strict.post(`/v1/subscriptions/${sub.id}/test`, {}, 202, { schema: deliverySchema });
    // The same database without the setting publishes anything, as before.
    await publish(api, { type: "strict.unknown", data: { n: 3 } });

    await waitFor(() => receivedAt(receiver, "/strict").length >= 3, { what: "the strict subscription's events" });
    await waitFor(() => receivedAt(receiver, "/strict-all").length >= 3, { what: "the wildcard's events" });
    expect(
      receiver.received
        .filter((w) => w.path === "/strict")
        .map((w) => w.json.type)
        .sort(),
    ).toEqual(["strict.known", "strict.old", "webhook.test"]);
  });
});
