import { subscribe, type TestApi } from "@webhooks/api/testing";
import { sql, type TestDatabase } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliverySchema } from "../src/deliveries/schemas.ts";
import { eventSchema } from "../src/events/schemas.ts";
import {
  type CreateSubscriptionRequest,
  createdSubscriptionSchema,
  recoverySchema,
  subscriptionListSchema,
  subscriptionSchema,
} from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";
import { type SeedRow, seedDeliveries } from "./seed-deliveries.ts";

// Self-service operations (docs/api.md#subscriptions) through the API alone (no worker runs here,
// so queued deliveries stay queued). The end-to-end side (signatures during an overlap, headers on
// the wire, test events arriving) is in apps/worker/test/self-service.test.ts.

const test = apiTest();

const create = (api: TestApi, body: Partial<CreateSubscriptionRequest> = {}) =>
  subscribe(api, { events: ["invoice.paid"], ...body });

describe("custom headers", () => {
  test("are stored, returned on every subscription response, and replaced by PUT", async ({ api, database }) => {
    const created = await create(api, { headers: { Authorization: "Bearer abc", "X-Tenant": "acme" } });
    expect(created.headers).toEqual({ Authorization: "Bearer abc", "X-Tenant": "acme" });
    expect(
      (await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema })).body.headers,
    ).toEqual({ Authorization: "Bearer abc", "X-Tenant": "acme" });
    const listed = (
      await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema })
    ).body.data.find((s: { id: string }) => s.id === created.id);
    expect(listed?.headers).toEqual({ Authorization: "Bearer abc", "X-Tenant": "acme" });
    const updated = await api.put(`/v1/subscriptions/${created.id}`, { headers: { "X-Other": "1" } }, 200, {
      schema: subscriptionSchema,
    });
    expect(updated.body.headers).toEqual({ "X-Other": "1" });
    // An update without headers keeps them; {} removes them.
    expect((await api.call("PUT", `/v1/subscriptions/${created.id}`, { json: { active: true } })).body.headers).toEqual(
      { "X-Other": "1" },
    );
    expect((await api.call("PUT", `/v1/subscriptions/${created.id}`, { json: { headers: {} } })).body.headers).toEqual(
      {},
    );
    expect((await create(api)).headers).toEqual({});
  });

  const refused = [
    "Content-Type",
    "content-length",
    "Host",
    "USER-AGENT",
    "webhook-id",
    "Webhook-Signature",
    "webhook-timestamp",
    "webhook-custom",
    "Connection",
    "Transfer-Encoding",
  ];
  test.for(refused)("refuses %s on create and on PUT, naming it", async (name, { api, database }) => {
    const onCreate = await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/h", events: ["*"], headers: { "X-Fine": "1", [name]: "value" } },
    });
    expect(onCreate.status).toBe(400);
    expect(onCreate.body.error).toMatchObject({ type: "invalid_request_error", param: `headers.${name}` });
    expect(onCreate.body.error.message).toContain(name);
    const sub = await create(api);
    const onPut = await api.put(`/v1/subscriptions/${sub.id}`, { headers: { [name]: "value" } }, 400);
    expect(onPut.body.error.param).toBe(`headers.${name}`);
  });

  test("refuses bad names, bad values, case-insensitive duplicates, more than 20 and more than 4 KiB", async ({
    api,
    database,
  }) => {
    const post = (headers: unknown) =>
      api.call("POST", "/v1/subscriptions", { json: { url: "https://example.com/h", events: ["*"], headers } });
    expect((await post({ "Bad Name": "x" })).body.error.param).toBe("headers.Bad Name");
    expect((await post({ "X-A": "line\nbreak" })).body.error.param).toBe("headers.X-A");
    expect((await post({ "X-A": "caf\u00e9" })).body.error.param).toBe("headers.X-A");
    expect((await post({ "X-A": 5 })).body.error.param).toBe("headers.X-A");
    expect((await post({ "X-A": "1", "x-a": "2" })).body.error.param).toBe("headers.x-a");
    // A key JSON.parse keeps, which an object copied key by key loses: refused, not silently dropped.
    const proto = await api.call("POST", "/v1/subscriptions", {
      body: '{"url":"https://example.com/h","events":["*"],"headers":{"__proto__":"x"}}',
      headers: { "content-type": "application/json" },
    });
    expect(proto.status).toBe(400);
    expect(proto.body.error.param).toBe("headers.__proto__");
    const many = await post(Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, "v"])));
    expect(many.status).toBe(400);
    expect(many.body.error.param).toBe("headers");
    const big = await post({ "X-Big": "v".repeat(4096) });
    expect(big.status).toBe(400);
    expect(big.body.error.param).toBe("headers");
    expect((await post(["X-A"])).body.error.param).toBe("headers");
    expect((await post(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-H${i}`, "v"])))).status).toBe(201);
  });

  test("are snapshotted with each delivery when it is created", async ({ api, database }) => {
    const sub = await create(api, { headers: { "X-Version": "1" } });
    const published = await api.post("/v1/events", { type: "invoice.paid", data: {} }, 202, { schema: eventSchema });
    await api.put(`/v1/subscriptions/${sub.id}`, { headers: { "X-Version": "2" } }, 200, {
      schema: subscriptionSchema,
    });
    const rows = await sql<{ headers: Record<string, string> }>(
      database.url,
      "SELECT headers FROM deliveries WHERE subscription_id = $1 AND event_id = $2",
      [sub.id, published.body.id],
    );
    expect(rows).toEqual([{ headers: { "X-Version": "1" } }]);
  });
});

describe("POST /v1/subscriptions/{id}/rotate_secret", () => {
  test("returns a new secret once, and only there", async ({ api, database }) => {
    const sub = await create(api);
    const rotated = await api.post(`/v1/subscriptions/${sub.id}/rotate_secret`, { overlap: "2s" }, 200, {
      schema: createdSubscriptionSchema,
    });
    expect(rotated.body).toMatchObject({ id: sub.id, object: "subscription", url: sub.url });
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotated.body.secret).not.toBe(sub.secret);
    for (const response of [
      await api.get(`/v1/subscriptions/${sub.id}`, 200, { schema: subscriptionSchema }),
      await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema }),
      await api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: { active: true } }),
    ]) {
      expect(response.status).toBe(200);
      expect(JSON.stringify(response.body)).not.toContain(rotated.body.secret);
      expect(JSON.stringify(response.body)).not.toContain(sub.secret);
    }
    // The secrets are stored encrypted: neither appears in the table.
    const stored = await sql<{ ciphertext: Buffer }>(database.url, "SELECT ciphertext FROM signing_secrets");
    for (const row of stored) {
      expect(row.ciphertext.toString("latin1")).not.toContain(String(rotated.body.secret).slice(6, 20));
    }
    const [row] = await sql<{ previous_secret_id: string | null; expires_in: number }>(
      database.url,
      "SELECT previous_secret_id, extract(epoch FROM previous_secret_expires_at - now())::float8 AS expires_in FROM subscriptions WHERE id = $1",
      [sub.id],
    );
    expect(row!.previous_secret_id).not.toBeNull();
    expect(row!.expires_in).toBeGreaterThan(0);
    expect(row!.expires_in).toBeLessThanOrEqual(2);
  });

  test("defaults the overlap to 24h; 0s keeps no previous secret; no body is fine", async ({ api, database }) => {
    const sub = await create(api);
    await api.post(`/v1/subscriptions/${sub.id}/rotate_secret`, undefined, 200, { schema: createdSubscriptionSchema });
    const [defaulted] = await sql<{ hours: number }>(
      database.url,
      "SELECT extract(epoch FROM previous_secret_expires_at - now())::float8 / 3600 AS hours FROM subscriptions WHERE id = $1",
      [sub.id],
    );
    expect(defaulted!.hours).toBeGreaterThan(23.9);
    expect(defaulted!.hours).toBeLessThanOrEqual(24);
    await api.post(`/v1/subscriptions/${sub.id}/rotate_secret`, { overlap: "0s" }, 200, {
      schema: createdSubscriptionSchema,
    });
    const [none] = await sql<{ previous_secret_id: string | null }>(
      database.url,
      "SELECT previous_secret_id FROM subscriptions WHERE id = $1",
      [sub.id],
    );
    expect(none!.previous_secret_id).toBeNull();
    await api.post(`/v1/subscriptions/${sub.id}/rotate_secret`, { overlap: "7d" }, 200, {
      schema: createdSubscriptionSchema,
    });
  });

  test.for([["8d"], ["-1s"], ["24"], ["1w"], [""], [24]])(
    "refuses overlap %j, naming overlap",
    async ([overlap], { api, database }) => {
      const sub = await create(api);
      const response = await api.post(`/v1/subscriptions/${sub.id}/rotate_secret`, { overlap }, 400);
      expect(response.body.error.param).toBe("overlap");
    },
  );

  test("refuses unknown fields and unknown or deleted subscriptions", async ({ api, database }) => {
    const sub = await create(api);
    expect(
      (await api.call("POST", `/v1/subscriptions/${sub.id}/rotate_secret`, { json: { secret: "whsec_x" } })).body.error
        .param,
    ).toBe("secret");
    await api.post("/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/rotate_secret", undefined, 404);
    await api.call("DELETE", `/v1/subscriptions/${sub.id}`);
    await api.post(`/v1/subscriptions/${sub.id}/rotate_secret`, undefined, 404);
  });
});

describe("POST /v1/subscriptions/{id}/recover", () => {
  test("resends exactly the failed deliveries created in the window, 1,000 of them, and a repeated call adds nothing", async ({
    api,
    database,
  }) => {
    const sub = await create(api);
    const other = await create(api);
    const base = Date.parse("2026-06-01T00:00:00.000Z");
    const since = new Date(base);
    const until = new Date(base + 3_600_000);
    const at = (ms: number) => new Date(base + ms);
    // 1,000 failed in the window: 600 for good, 400 waiting for a retry; many share a millisecond.
    const failedRows: SeedRow[] = Array.from({ length: 1_000 }, (_, i) => ({
      status: "failed",
      createdAt: at(Math.floor(i / 3) * 1_000),
      ...(i % 5 < 2 ? { retryAt: new Date(Date.now() + 3_600_000) } : {}),
    }));
    const failed = await seedDeliveries(database, sub.id, failedRows);
    // Untouched: delivered and queued in the window, failed outside it (just before since, at until), another subscription's.
    const untouched = [
      ...(await seedDeliveries(database, sub.id, [
        ...Array.from({ length: 50 }, (_, i): SeedRow => ({ status: "delivered", createdAt: at(i * 10_000) })),
        ...Array.from({ length: 50 }, (_, i): SeedRow => ({ status: "queued", createdAt: at(i * 10_000 + 1) })),
        { status: "failed", createdAt: new Date(base - 1) },
        { status: "failed", createdAt: until },
      ])),
      ...(await seedDeliveries(database, other.id, [{ status: "failed", createdAt: at(5) }])),
    ];
    const before = await statuses(database, untouched);

    const body = { since: since.toISOString(), until: until.toISOString() };
    const [first, second] = await Promise.all([
      api.call("POST", `/v1/subscriptions/${sub.id}/recover`, { json: body }),
      api.call("POST", `/v1/subscriptions/${sub.id}/recover`, { json: body }),
    ]);
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    expect(first.body).toMatchObject({
      object: "recovery",
      subscription_id: sub.id,
      since: body.since,
      until: body.until,
    });
    // Each failed delivery is resent once: the two calls share the 1,000 between them.
    expect(first.body.deliveries + second.body.deliveries).toBe(1_000);
    const third = await api.call("POST", `/v1/subscriptions/${sub.id}/recover`, { json: body });
    expect(third.body.deliveries).toBe(0);

    const after = await statuses(database, failed);
    expect(
      [...after.values()].every(
        (row) =>
          row.status === "queued" &&
          row.next_attempt_at !== null &&
          row.next_attempt_at.getTime() <= Date.now() + 1_000,
      ),
    ).toBe(true);
    expect(after.size).toBe(1_000);
    expect(await statuses(database, untouched)).toEqual(before);
    // Queued again means a job in the queue for each, the retries' delayed jobs brought forward.
    const jobs = await api.queue.queue.getJobCounts("wait", "prioritized", "delayed");
    expect((jobs.wait ?? 0) + (jobs.prioritized ?? 0)).toBeGreaterThanOrEqual(1_000);
  });

  test("defaults until to the time of the request", async ({ api, database }) => {
    const sub = await create(api);
    const ids = await seedDeliveries(database, sub.id, [
      { status: "failed", createdAt: new Date(Date.now() - 60_000) },
      { status: "delivered", createdAt: new Date(Date.now() - 60_000) },
    ]);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const response = await api.post(`/v1/subscriptions/${sub.id}/recover`, { since }, 202, { schema: recoverySchema });
    expect(response.body.deliveries).toBe(1);
    expect(Math.abs(Date.parse(response.body.until) - Date.now())).toBeLessThan(10_000);
    expect((await statuses(database, ids)).get(ids[0]!)!.status).toBe("queued");
  });

  test("refuses a missing or malformed since, an until not after since, and unknown subscriptions", async ({
    api,
    database,
  }) => {
    const sub = await create(api);
    const post = (json: unknown) => api.call("POST", `/v1/subscriptions/${sub.id}/recover`, { json });
    expect((await post({})).body.error).toMatchObject({ code: "parameter_missing", param: "since" });
    expect((await post({ since: "yesterday" })).body.error.param).toBe("since");
    expect((await post({ since: "2026-01-02T00:00:00Z", until: "2026-01-01T00:00:00Z" })).body.error.param).toBe(
      "until",
    );
    expect((await post({ since: "2026-01-02T00:00:00Z", extra: 1 })).body.error.param).toBe("extra");
    // Without until, the window ends at the time of the request: a since after it is refused too.
    const future = await post({ since: "2099-01-01T00:00:00Z" });
    expect(future.status).toBe(400);
    expect(future.body.error).toMatchObject({
      type: "invalid_request_error",
      code: "parameter_invalid",
      param: "since",
    });
    // Years 1-9999 once in UTC, whatever the offset (a later year has no four-digit ISO form).
    const pastYear9999 = await post({ since: "2026-01-01T00:00:00Z", until: "9999-12-31T23:59:59-14:00" });
    expect(pastYear9999.status).toBe(400);
    expect(pastYear9999.body.error.param).toBe("until");
    await api.post(
      `/v1/subscriptions/${sub.id}/recover`,
      { since: "2026-01-01T00:00:00Z", until: "9999-12-31T09:59:59-14:00" },
      202,
      { schema: recoverySchema },
    );
    await api.post("/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/recover", { since: "2026-01-01T00:00:00Z" }, 404);
  });
});

async function statuses(database: TestDatabase, ids: string[]) {
  const rows = await sql<{ id: string; status: string; next_attempt_at: Date | null }>(
    database.url,
    "SELECT id, status::text AS status, next_attempt_at FROM deliveries WHERE id = ANY($1::text[])",
    [ids],
  );
  return new Map(rows.map((row) => [row.id, row]));
}

describe("POST /v1/subscriptions/{id}/test", () => {
  test("creates one delivery for this subscription alone, paused or not, whatever its events", async ({
    api,
    database,
  }) => {
    const paused = await create(api, { events: ["invoice.paid"], active: false });
    const bystander = await create(api, { events: ["*"] });
    const response = await api.post(`/v1/subscriptions/${paused.id}/test`, undefined, 202, { schema: deliverySchema });
    expect(response.body).toMatchObject({
      object: "delivery",
      subscription_id: paused.id,
      event: "webhook.test",
      status: "queued",
      attempts: 0,
    });
    expect(await api.get(`/v1/deliveries/${response.body.id}`, 200, { schema: deliverySchema })).toMatchObject({
      status: 200,
      body: response.body,
    });
    const event = await api.get(`/v1/events/${response.body.event_id}`, 200, { schema: eventSchema });
    expect(event.body).toMatchObject({ type: "webhook.test" });
    expect(Object.keys(event.body.data ?? {}).length).toBeGreaterThan(0);
    const ofEvent = await sql(database.url, "SELECT subscription_id FROM deliveries WHERE event_id = $1", [
      response.body.event_id,
    ]);
    expect(ofEvent).toEqual([{ subscription_id: paused.id }]);
    expect(bystander.id).not.toBe(paused.id);

    const custom = await api.post(
      `/v1/subscriptions/${paused.id}/test`,
      { type: "order.created", data: { order: 7 } },
      202,
      { schema: deliverySchema },
    );
    expect(custom.body.event).toBe("order.created");
    expect((await api.get(`/v1/events/${custom.body.event_id}`, 200, { schema: eventSchema })).body.data).toEqual({
      order: 7,
    });
  });

  test("applies the type rules of POST /v1/events", async ({ api, database }) => {
    const sub = await create(api);
    const post = (json: unknown) => api.call("POST", `/v1/subscriptions/${sub.id}/test`, { json });
    expect((await post({ type: "operational.subscription.disabled" })).body.error.param).toBe("type");
    expect((await post({ type: "has space" })).body.error.param).toBe("type");
    expect((await post({ data: [1] })).body.error.param).toBe("data");
    expect((await post({ other: 1 })).body.error.param).toBe("other");
    await api.post("/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/test", undefined, 404);
    await api.call("DELETE", `/v1/subscriptions/${sub.id}`);
    await api.post(`/v1/subscriptions/${sub.id}/test`, undefined, 404);
  });
});
