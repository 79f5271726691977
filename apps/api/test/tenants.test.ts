import { publish, subscribe, type TestApi } from "@webhooks/api/testing";
import { createApiKey } from "@webhooks/db";
import { sql, type TestDatabase } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliveryListSchema, deliverySchema } from "../src/deliveries/schemas.ts";
import { eventSchema, type PublishEventRequest } from "../src/events/schemas.ts";
import { portalSessionSchema } from "../src/portal-sessions/schemas.ts";
import {
  type CreateSubscriptionRequest,
  subscriptionListSchema,
  subscriptionSchema,
} from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

// Tenants (docs/api.md#tenants) through the API: two tenants with the same event types, untenanted
// resources beside them, and the two kinds of scoped credential (a scoped API key and a portal
// session token) checked route by route. No worker runs here: deliveries stay as the test sets
// them.

const A = "acme";
const B = "globex:eu-1";

interface World {
  subs: { a1: string; a2: string; b1: string; b2: string; u1: string; u2: string };
  events: { a: string; b: string; u: string };
  /** Every delivery, by tenant (null for none). */
  deliveries: { a: string[]; b: string[]; u: string[] };
  credentials: { key: string; token: string };
}

function createSubscription(api: TestApi, body: Partial<CreateSubscriptionRequest>, key?: string) {
  return subscribe(api, body, key === undefined ? {} : { key });
}

function publishEvent(api: TestApi, body: Omit<PublishEventRequest, "data">) {
  return publish(api, { data: { n: 1 }, ...body });
}

async function deliveryIdsOf(database: TestDatabase, tenant: string | null): Promise<string[]> {
  const rows = await sql<{ id: string }>(
    database.url,
    "SELECT id FROM deliveries WHERE tenant_id IS NOT DISTINCT FROM $1 ORDER BY created_at DESC, id DESC",
    [tenant],
  );
  return rows.map((row) => row.id);
}

const test = apiTest().extend("world", { scope: "file" }, async ({ api, database }): Promise<World> => {
  // The same event types in both tenants and outside them.
  const subs = {
    a1: (await createSubscription(api, { events: ["invoice.paid"], tenant_id: A })).id,
    a2: (await createSubscription(api, { events: ["*"], tenant_id: A })).id,
    b1: (await createSubscription(api, { events: ["invoice.paid"], tenant_id: B })).id,
    b2: (await createSubscription(api, { events: ["*"], tenant_id: B })).id,
    u1: (await createSubscription(api, { events: ["invoice.paid"] })).id,
    u2: (await createSubscription(api, { events: ["*"] })).id,
  };
  const events = {
    a: (await publishEvent(api, { type: "invoice.paid", tenant_id: A })).id,
    b: (await publishEvent(api, { type: "invoice.paid", tenant_id: B })).id,
    u: (await publishEvent(api, { type: "invoice.paid" })).id,
  };
  // More of each, so that lists page, with outcomes for the status and response_code filters.
  for (let i = 0; i < 4; i++) {
    await publishEvent(api, { type: "customer.updated", tenant_id: A });
    await publishEvent(api, { type: "customer.updated", tenant_id: B });
    await publishEvent(api, { type: "customer.updated" });
  }
  await sql(
    database.url,
    `WITH numbered AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM deliveries)
     UPDATE deliveries d SET
       status = (CASE n % 3 WHEN 0 THEN 'queued' WHEN 1 THEN 'delivered' ELSE 'failed' END)::delivery_status,
       attempts = CASE n % 3 WHEN 0 THEN 0 ELSE 1 END,
       response_code = CASE n % 3 WHEN 0 THEN NULL WHEN 1 THEN 200 ELSE (CASE WHEN n % 2 = 0 THEN 500 ELSE 404 END) END,
       next_attempt_at = CASE n % 3 WHEN 0 THEN d.created_at ELSE NULL END
     FROM numbered WHERE numbered.id = d.id`,
  );
  const { key } = await createApiKey({ db: api.db }, { name: "acme's key", tenantId: A });
  const session = await api.post("/v1/portal_sessions", { tenant_id: A, expires_in: "1h" }, 201, {
    schema: portalSessionSchema,
  });
  return {
    subs,
    events,
    deliveries: {
      a: await deliveryIdsOf(database, A),
      b: await deliveryIdsOf(database, B),
      u: await deliveryIdsOf(database, null),
    },
    credentials: { key, token: session.body.token },
  };
});

const credentials = [
  ["a tenant-scoped API key", (world: World) => world.credentials.key],
  ["a portal session token", (world: World) => world.credentials.token],
] as const;

describe("fan-out never crosses tenants", () => {
  async function subscriptionsReached(database: TestDatabase, eventId: string): Promise<string[]> {
    const rows = await sql<{ subscription_id: string; tenant_id: string | null }>(
      database.url,
      "SELECT subscription_id, tenant_id FROM deliveries WHERE event_id = $1 ORDER BY subscription_id",
      [eventId],
    );
    return rows.map((row) => `${row.subscription_id}:${row.tenant_id}`);
  }

  test("an event of a tenant reaches only that tenant's subscriptions, whose deliveries carry the tenant", async ({
    api,
    database,
    world,
  }) => {
    const { subs, events } = world;
    expect(await subscriptionsReached(database, events.a)).toEqual([`${subs.a1}:${A}`, `${subs.a2}:${A}`].sort());
    expect(await subscriptionsReached(database, events.b)).toEqual([`${subs.b1}:${B}`, `${subs.b2}:${B}`].sort());
  });

  test("an untenanted event reaches only untenanted subscriptions", async ({ api, database, world }) => {
    const { subs, events } = world;
    expect(await subscriptionsReached(database, events.u)).toEqual([`${subs.u1}:null`, `${subs.u2}:null`].sort());
  });

  test("shows tenant_id on subscriptions, events and deliveries of a tenant, and no tenant_id on the others", async ({
    api,
    database,
    world,
  }) => {
    const { subs, events, deliveries } = world;
    expect((await api.get(`/v1/subscriptions/${subs.a1}`, 200, { schema: subscriptionSchema })).body.tenant_id).toBe(A);
    expect((await api.get(`/v1/events/${events.b}`, 200, { schema: eventSchema })).body.tenant_id).toBe(B);
    expect((await api.get(`/v1/deliveries/${deliveries.a[0]}`, 200, { schema: deliverySchema })).body.tenant_id).toBe(
      A,
    );
    // Without tenants the responses are what they were before tenants existed.
    expect(
      (await api.get(`/v1/subscriptions/${subs.u1}`, 200, { schema: subscriptionSchema })).body,
    ).not.toHaveProperty("tenant_id");
    expect((await api.get(`/v1/events/${events.u}`, 200, { schema: eventSchema })).body).not.toHaveProperty(
      "tenant_id",
    );
    expect(
      (await api.get(`/v1/deliveries/${deliveries.u[0]}`, 200, { schema: deliverySchema })).body,
    ).not.toHaveProperty("tenant_id");
  });
});

describe.each(credentials)("%s", (_name, credential) => {
  /** Calls as the scoped credential. */
  const caller = (api: TestApi, key: string) => (method: string, path: string, json?: unknown) =>
    api.call(method, path, { key, ...(json === undefined ? {} : { json }) });

  /** Every route that takes an id, with another tenant's (or no tenant's) resources. */
  function foreignRequests(world: World): [string, string, unknown?][] {
    const { subs, events, deliveries } = world;
    const requests: [string, string, unknown?][] = [];
    for (const sub of [subs.b1, subs.u1]) {
      requests.push(
        ["GET", `/v1/subscriptions/${sub}`],
        ["PUT", `/v1/subscriptions/${sub}`, { active: false }],
        ["POST", `/v1/subscriptions/${sub}/rotate_secret`, { overlap: "0s" }],
        ["POST", `/v1/subscriptions/${sub}/recover`, { since: "2020-01-01T00:00:00Z" }],
        ["POST", `/v1/subscriptions/${sub}/test`, {}],
        ["DELETE", `/v1/subscriptions/${sub}`],
      );
    }
    for (const event of [events.b, events.u]) requests.push(["GET", `/v1/events/${event}`]);
    for (const delivery of [deliveries.b[0]!, deliveries.u[0]!]) {
      requests.push(
        ["GET", `/v1/deliveries/${delivery}`],
        ["GET", `/v1/deliveries/${delivery}/attempts`],
        ["POST", `/v1/deliveries/${delivery}/retry`],
      );
    }
    return requests;
  }

  test("gets a 404 for every id of another tenant or of none, exactly as for an id that does not exist", async ({
    api,
    database,
    world,
  }) => {
    const call = caller(api, credential(world));
    const before = await sql(
      database.url,
      "SELECT id, active, secret_id, deleted_at FROM subscriptions WHERE tenant_id IS DISTINCT FROM $1 ORDER BY id",
      [A],
    );
    const deliveriesBefore = await sql(
      database.url,
      "SELECT id, status, next_attempt_at FROM deliveries WHERE tenant_id IS DISTINCT FROM $1 ORDER BY id",
      [A],
    );
    for (const [method, path, json] of foreignRequests(world)) {
      const response = await call(method, path, json);
      expect(response.status, `${method} ${path}: ${JSON.stringify(response.body)}`).toBe(404);
      // The same answer as for an id that does not exist: same code and param, the id in the message.
      const id = /\/v1\/\w+\/(\w+)/.exec(path)![1]!;
      const missingId = `${id.slice(0, 4)}01ARZ3NDEKTSV4RRFFQ69G5FAV`;
      const missing = await call(method, path.replace(id, missingId), json);
      expect(missing.status).toBe(404);
      expect(response.body.error).toEqual({
        ...missing.body.error,
        message: missing.body.error.message.replace(missingId, id),
        request_id: response.body.error.request_id,
      });
    }
    // Nothing of theirs changed, no event was sent to them.
    expect(
      await sql(
        database.url,
        "SELECT id, active, secret_id, deleted_at FROM subscriptions WHERE tenant_id IS DISTINCT FROM $1 ORDER BY id",
        [A],
      ),
    ).toEqual(before);
    expect(
      await sql(
        database.url,
        "SELECT id, status, next_attempt_at FROM deliveries WHERE tenant_id IS DISTINCT FROM $1 ORDER BY id",
        [A],
      ),
    ).toEqual(deliveriesBefore);
  });

  test("lists only its tenant's subscriptions; a tenant_id filter naming another tenant lists nothing", async ({
    api,
    database,
    world,
  }) => {
    const call = caller(api, credential(world));
    const ids = async (query: string) => {
      const response = await call("GET", `/v1/subscriptions${query}`);
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return response.body.data.map((s: { id: string; tenant_id: string }) => {
        expect(s.tenant_id).toBe(A);
        return s.id;
      });
    };
    const own = (
      await sql<{ id: string }>(
        database.url,
        "SELECT id FROM subscriptions WHERE tenant_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC",
        [A],
      )
    ).map((r) => r.id);
    expect(own).toEqual(expect.arrayContaining([world.subs.a1, world.subs.a2]));
    expect(await ids("?limit=100")).toEqual(own);
    expect(await ids(`?limit=100&tenant_id=${A}`)).toEqual(own);
    expect(await ids(`?limit=100&tenant_id=${encodeURIComponent(B)}`)).toEqual([]);
    // Paging one by one gives the same, and another tenant's id is not a cursor.
    const paged: string[] = [];
    let cursor = "";
    for (;;) {
      const page = await call("GET", `/v1/subscriptions?limit=1${cursor}`);
      paged.push(...page.body.data.map((s: { id: string }) => s.id));
      if (!page.body.has_more) break;
      cursor = `&starting_after=${paged.at(-1)}`;
    }
    expect(paged).toEqual(own);
    const foreignCursor = await call("GET", `/v1/subscriptions?starting_after=${world.subs.b1}`);
    expect(foreignCursor.status).toBe(400);
    expect(foreignCursor.body.error).toMatchObject({ code: "resource_missing", param: "starting_after" });
  });

  test("lists only its tenant's deliveries, in every filter combination", async ({ api, database, world }) => {
    const call = caller(api, credential(world));
    const { subs, deliveries } = world;
    const since = (
      await sql<{ at: Date }>(database.url, "SELECT created_at AS at FROM deliveries WHERE id = $1", [deliveries.a[3]])
    )[0]!.at.toISOString();
    const filters: Record<string, string>[] = [];
    for (const subscription of [undefined, subs.a1, subs.a2, subs.b1, subs.u1]) {
      for (const tenant of [undefined, A, B]) {
        const extras: Record<string, string>[] = [
          {},
          { status: "failed" },
          { status: "queued" },
          { event: "invoice.paid" },
          { response_code: "500" },
          { response_code: "2xx" },
          { response_code: "4xx" },
          { since },
          { until: since },
          { status: "failed", response_code: "5xx" },
        ];
        for (const extra of extras) {
          filters.push({
            ...(subscription ? { subscription_id: subscription } : {}),
            ...(tenant ? { tenant_id: tenant } : {}),
            ...extra,
          });
        }
      }
    }
    for (const filter of filters) {
      // What an unscoped key lists with the same filters, keeping A's records only.
      const query = new URLSearchParams({ ...filter, limit: "100" }).toString();
      const everything = (await api.get(`/v1/deliveries?${query}`, 200, { schema: deliveryListSchema })).body.data as {
        id: string;
        tenant_id?: string;
      }[];
      const expected = filter.tenant_id === B ? [] : everything.filter((d) => d.tenant_id === A).map((d) => d.id);
      const response = await call("GET", `/v1/deliveries?${query}`);
      expect(response.status, `${query}: ${JSON.stringify(response.body)}`).toBe(200);
      expect(
        response.body.data.map((d: { id: string }) => d.id),
        query,
      ).toEqual(expected);
    }
    // Every one of A's, and only those, page by page.
    const paged: string[] = [];
    let cursor = "";
    for (;;) {
      const page = await call("GET", `/v1/deliveries?limit=3${cursor}`);
      paged.push(...page.body.data.map((d: { id: string }) => d.id));
      if (!page.body.has_more) break;
      cursor = `&starting_after=${paged.at(-1)}`;
    }
    const ofA = await deliveryIdsOf(database, A);
    expect(paged).toEqual(ofA);
    const backwards = await call("GET", `/v1/deliveries?limit=100&ending_before=${ofA.at(-1)}`);
    expect(backwards.body.data.map((d: { id: string }) => d.id)).toEqual(ofA.slice(0, -1));
    for (const cursor of [`starting_after=${deliveries.b[0]}`, `ending_before=${deliveries.u[0]}`]) {
      const foreign = await call("GET", `/v1/deliveries?${cursor}`);
      expect(foreign.status).toBe(400);
      expect(foreign.body.error.code).toBe("resource_missing");
    }
  });

  test("cannot publish events, except test events to its own subscriptions", async ({ api, database, world }) => {
    const call = caller(api, credential(world));
    const refused = await call("POST", "/v1/events", { type: "invoice.paid", data: {} });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: "permission_error", code: "permission_denied" });
    const withTenant = await call("POST", "/v1/events", { type: "invoice.paid", data: {}, tenant_id: A });
    expect(withTenant.status).toBe(403);

    const test = await call("POST", `/v1/subscriptions/${world.subs.a1}/test`, {});
    expect(test.status, JSON.stringify(test.body)).toBe(202);
    expect(test.body).toMatchObject({
      subscription_id: world.subs.a1,
      tenant_id: A,
      event: "webhook.test",
      status: "queued",
    });
    const event = await call("GET", `/v1/events/${test.body.event_id}`);
    expect(event.status).toBe(200);
    expect(event.body.tenant_id).toBe(A);
  });

  test("cannot create portal sessions", async ({ api, database, world }) => {
    const call = caller(api, credential(world));
    for (const tenant of [A, B]) {
      const response = await call("POST", "/v1/portal_sessions", { tenant_id: tenant });
      expect(response.status).toBe(403);
      expect(response.body.error).toMatchObject({ type: "permission_error", code: "permission_denied" });
    }
  });

  test("creates subscriptions for its own tenant only, and manages them", async ({ api, database, world }) => {
    const call = caller(api, credential(world));
    const implicit = await createSubscription(api, { events: ["invoice.paid"] }, credential(world));
    expect(implicit.tenant_id).toBe(A);
    const explicit = await createSubscription(api, { events: ["invoice.paid"], tenant_id: A }, credential(world));
    expect(explicit.tenant_id).toBe(A);
    const other = await call("POST", "/v1/subscriptions", {
      url: "https://example.com/hooks",
      events: ["x"],
      tenant_id: B,
    });
    expect(other.status).toBe(403);
    expect(other.body.error.type).toBe("permission_error");

    expect((await call("GET", `/v1/subscriptions/${implicit.id}`)).status).toBe(200);
    expect((await call("PUT", `/v1/subscriptions/${implicit.id}`, { active: false })).body.active).toBe(false);
    expect((await call("POST", `/v1/subscriptions/${implicit.id}/rotate_secret`, {})).body.secret).toMatch(/^whsec_/);
    expect(
      (await call("POST", `/v1/subscriptions/${implicit.id}/recover`, { since: "2020-01-01T00:00:00Z" })).status,
    ).toBe(202);
    // Its events now reach the new subscription too, and no other tenant's.
    const published = await publishEvent(api, { type: "invoice.paid", tenant_id: A });
    const reached = await sql<{ subscription_id: string }>(
      database.url,
      "SELECT subscription_id FROM deliveries WHERE event_id = $1 ORDER BY 1",
      [published.id],
    );
    expect(reached.map((r) => r.subscription_id)).toEqual([world.subs.a1, world.subs.a2, explicit.id].sort());
    expect((await call("DELETE", `/v1/subscriptions/${implicit.id}`)).status).toBe(200);
    expect((await call("DELETE", `/v1/subscriptions/${explicit.id}`)).status).toBe(200);
  });

  test("reads and resends its own deliveries", async ({ api, database, world }) => {
    const call = caller(api, credential(world));
    await sql(
      database.url,
      `UPDATE deliveries SET status = 'failed', attempts = 1, response_code = 500, next_attempt_at = NULL
       WHERE id = (SELECT id FROM deliveries WHERE tenant_id = $1 ORDER BY id LIMIT 1)`,
      [A],
    );
    const failed = (await call("GET", "/v1/deliveries?status=failed&limit=1")).body.data[0];
    expect(failed.tenant_id).toBe(A);
    expect((await call("GET", `/v1/deliveries/${failed.id}`)).body.id).toBe(failed.id);
    expect((await call("GET", `/v1/deliveries/${failed.id}/attempts`)).status).toBe(200);
    const resent = await call("POST", `/v1/deliveries/${failed.id}/retry`);
    expect(resent.status).toBe(202);
    expect(resent.body).toMatchObject({ id: failed.id, status: "queued", tenant_id: A });
  });
});

describe("an unscoped key", () => {
  test("sees every tenant's resources, and filters by tenant_id", async ({ api, database, world }) => {
    const all = (await api.get("/v1/deliveries?limit=100", 200, { schema: deliveryListSchema })).body.data.map(
      (d: { id: string }) => d.id,
    );
    expect(all).toEqual(expect.arrayContaining([...world.deliveries.a, ...world.deliveries.b, ...world.deliveries.u]));
    const ofB = (
      await api.get(`/v1/deliveries?limit=100&tenant_id=${encodeURIComponent(B)}`, 200, { schema: deliveryListSchema })
    ).body.data.map((d: { id: string }) => d.id);
    expect(ofB).toEqual(world.deliveries.b);
    const subsOfB = (
      await api.get(`/v1/subscriptions?limit=100&tenant_id=${encodeURIComponent(B)}`, 200, {
        schema: subscriptionListSchema,
      })
    ).body.data.map((s: { id: string }) => s.id);
    expect(subsOfB.sort()).toEqual([world.subs.b1, world.subs.b2].sort());
    await api.get(`/v1/subscriptions/${world.subs.b1}`, 200, { schema: subscriptionSchema });
  });
});

describe("tenant_id values", () => {
  test("cannot be changed by an update", async ({ api, database, world }) => {
    for (const key of [undefined, world.credentials.key]) {
      const response = await api.put(`/v1/subscriptions/${world.subs.a1}`, { tenant_id: "other" }, 400, { key });
      expect(response.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "parameter_not_updatable",
        param: "tenant_id",
      });
    }
    expect(
      (await api.get(`/v1/subscriptions/${world.subs.a1}`, 200, { schema: subscriptionSchema })).body.tenant_id,
    ).toBe(A);
  });

  const bad: unknown[] = ["", "has space", "a/b", "é", "x".repeat(256), 42, null, ["acme"]];
  test.for(bad)("refuses %j with a 400 naming tenant_id", async (value, { api, database, world }) => {
    const requests: [string, unknown][] = [
      ["/v1/subscriptions", { url: "https://example.com/hooks", events: ["x"], tenant_id: value }],
      ["/v1/events", { type: "x", data: {}, tenant_id: value }],
      ["/v1/portal_sessions", { tenant_id: value }],
    ];
    for (const [path, json] of requests) {
      const response = await api.call("POST", path, { json });
      expect(response.status, `${path} ${JSON.stringify(response.body)}`).toBe(400);
      expect(response.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "parameter_invalid",
        param: "tenant_id",
      });
      expect(response.body.error.message).toContain("tenant_id must be 1 to 255 characters");
    }
    if (typeof value === "string") {
      for (const list of ["/v1/deliveries", "/v1/subscriptions"]) {
        const response = await api.get(`${list}?tenant_id=${encodeURIComponent(value)}`, 400);
        expect(response.body.error).toMatchObject({ code: "parameter_invalid", param: "tenant_id" });
      }
    }
  });

  test("accepts 255 characters of the allowed set", async ({ api, database, world }) => {
    const longest = `A-z_0.9:${"x".repeat(247)}`;
    expect((await createSubscription(api, { events: ["x"], tenant_id: longest })).tenant_id).toBe(longest);
  });
});
