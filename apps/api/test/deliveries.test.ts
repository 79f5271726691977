import { publish, subscribe, type TestApi } from "@webhooks/api/testing";
import { sql } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { attemptListSchema, deliveryListSchema, deliverySchema } from "../src/deliveries/schemas.ts";
import { apiTest } from "./fixtures.ts";

interface Row {
  id: string;
  subscription_id: string;
  status: string;
  event_type: string;
  created_at: Date;
}

/**
 * 250 deliveries: 5 subscriptions x 50 events of two types. The 5 deliveries of an event share a
 * creation time already; on top of that, a third of them are moved onto a single millisecond, so
 * paging must break many ties by id. Statuses are spread over the three states.
 */
const test = apiTest().extend("seed", { scope: "file" }, async ({ api, database }) => {
  const subscriptions: string[] = [];
  for (let i = 0; i < 5; i++) {
    subscriptions.push((await subscribe(api, { url: `https://example.com/${i}`, events: ["*"] })).id);
  }
  for (let i = 0; i < 50; i++) {
    await publish(api, { type: i % 2 ? "invoice.paid" : "invoice.refunded", data: { i } });
  }
  await sql(
    database.url,
    `
    WITH numbered AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM deliveries)
    UPDATE deliveries d SET
      status = (CASE n % 3 WHEN 0 THEN 'queued' WHEN 1 THEN 'delivered' ELSE 'failed' END)::delivery_status,
      created_at = CASE WHEN n BETWEEN 100 AND 185 THEN '2026-01-01T00:00:00.123Z'::timestamptz ELSE d.created_at END
    FROM numbered WHERE numbered.id = d.id`,
  );
  const rows = await sql<Row>(
    database.url,
    "SELECT id, subscription_id, status::text AS status, event_type, created_at FROM deliveries ORDER BY created_at DESC, id DESC",
  );
  expect(rows).toHaveLength(250);
  return { subscriptions, rows };
});

async function list(api: TestApi, query: string) {
  const response = await api.get(`/v1/deliveries${query ? `?${query}` : ""}`, 200, { schema: deliveryListSchema });
  return response.body;
}

/** Follows starting_after until has_more is false; returns the ids in order. */
async function listAll(api: TestApi, filters: URLSearchParams, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const query = new URLSearchParams(filters);
    query.set("limit", String(limit));
    if (cursor) query.set("starting_after", cursor);
    const body = await list(api, query.toString());
    expect(body.data.length).toBeLessThanOrEqual(limit);
    ids.push(...body.data.map((d) => d.id as string));
    if (!body.has_more) return ids;
    expect(body.data).toHaveLength(limit);
    cursor = ids.at(-1);
  }
  throw new Error("paging did not end");
}

describe("GET /v1/deliveries", () => {
  test("returns the list object with delivery records", async ({ api, database, seed }) => {
    const { rows } = seed;
    const body = await list(api, "");
    expect(body).toMatchObject({ object: "list", url: "/v1/deliveries", has_more: true });
    expect(body.data).toHaveLength(20);
    expect(Object.keys(body.data[0]!).sort()).toEqual(
      [
        "attempts",
        "created_at",
        "event",
        "event_id",
        "id",
        "next_retry_at",
        "object",
        "response_code",
        "status",
        "subscription_id",
      ].sort(),
    );
    expect(body.data.map((d) => d.id)).toEqual(rows.slice(0, 20).map((r) => r.id));
  });

  test("pages through all 250 deliveries, ties included, with no gap and no duplicate", async ({
    api,
    database,
    seed,
  }) => {
    const { rows } = seed;
    for (const limit of [1, 7, 20, 100]) {
      const ids = await listAll(api, new URLSearchParams(), limit);
      expect(ids).toEqual(rows.map((r) => r.id));
    }
  });

  test("pages backwards with ending_before", async ({ api, database, seed }) => {
    const { rows } = seed;
    const collected: string[] = [];
    let cursor = rows.at(-1)!.id;
    collected.unshift(cursor);
    for (;;) {
      const body = await list(api, `limit=9&ending_before=${cursor}`);
      // Still newest first within the page.
      collected.unshift(...body.data.map((d) => d.id as string));
      if (!body.has_more) break;
      cursor = body.data[0]!.id as string;
    }
    expect(collected).toEqual(rows.map((r) => r.id));
  });

  test("computes has_more exactly", async ({ api, database, seed }) => {
    const { rows, subscriptions } = seed;
    const sub = subscriptions[0]!;
    const count = rows.filter((r) => r.subscription_id === sub).length;
    expect((await list(api, `subscription_id=${sub}&limit=${count}`)).has_more).toBe(false);
    expect((await list(api, `subscription_id=${sub}&limit=${count - 1}`)).has_more).toBe(true);
    const last = rows.at(-1)!.id;
    expect(await list(api, `starting_after=${last}`)).toMatchObject({ has_more: false, data: [] });
  });

  test("applies each filter alone and every combination, through every page", async ({ api, database, seed }) => {
    const { rows, subscriptions } = seed;
    const since = rows[120]!.created_at;
    const until = rows[40]!.created_at;
    const filters: Record<string, (r: Row) => boolean> = {
      subscription_id: (r) => r.subscription_id === subscriptions[2],
      status: (r) => r.status === "failed",
      event: (r) => r.event_type === "invoice.paid",
      since: (r) => r.created_at.getTime() >= since.getTime(),
      until: (r) => r.created_at.getTime() < until.getTime(),
    };
    const values: Record<string, string> = {
      subscription_id: subscriptions[2]!,
      status: "failed",
      event: "invoice.paid",
      since: since.toISOString(),
      until: until.toISOString(),
    };
    const names = Object.keys(filters);
    for (let mask = 1; mask < 1 << names.length; mask++) {
      const chosen = names.filter((_, i) => mask & (1 << i));
      const query = new URLSearchParams(chosen.map((name): [string, string] => [name, values[name]!]));
      const expected = rows.filter((r) => chosen.every((name) => filters[name]!(r))).map((r) => r.id);
      expect(await listAll(api, query, 25), chosen.join("+")).toEqual(expected);
    }
  });

  test("treats since as inclusive and until as exclusive at the boundary", async ({ api, database, seed }) => {
    const { rows } = seed;
    const edge = rows[200]!;
    const iso = edge.created_at.toISOString();
    const plusOne = new Date(edge.created_at.getTime() + 1).toISOString();
    const atSince = await listAll(api, new URLSearchParams({ since: iso }), 100);
    expect(atSince).toContain(edge.id);
    expect(await listAll(api, new URLSearchParams({ since: plusOne }), 100)).not.toContain(edge.id);
    expect(await listAll(api, new URLSearchParams({ until: iso }), 100)).not.toContain(edge.id);
    expect(await listAll(api, new URLSearchParams({ until: plusOne }), 100)).toContain(edge.id);
    // An offset means the same instant.
    const offset = new Date(edge.created_at.getTime() + 2 * 3600_000).toISOString().replace("Z", "+02:00");
    expect(await listAll(api, new URLSearchParams({ since: offset }), 100)).toEqual(atSince);
    // So do ISO 8601's other spellings: an offset without its colon, and the basic format.
    expect(await listAll(api, new URLSearchParams({ since: offset.replace("+02:00", "+0200") }), 100)).toEqual(atSince);
    const basic = iso.replace(/[-:]/g, "").replace(".", ",");
    expect(await listAll(api, new URLSearchParams({ since: basic }), 100)).toEqual(atSince);
  });

  test("returns an empty list for an unknown subscription", async ({ api, database, seed }) => {
    expect(await list(api, "subscription_id=sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q")).toMatchObject({
      data: [],
      has_more: false,
    });
  });

  test("keeps the delivery log of a deleted subscription", async ({ api, database, seed }) => {
    const { rows, subscriptions } = seed;
    const sub = subscriptions[4]!;
    await api.call("DELETE", `/v1/subscriptions/${sub}`);
    const ids = await listAll(api, new URLSearchParams({ subscription_id: sub }), 100);
    expect(ids).toEqual(rows.filter((r) => r.subscription_id === sub).map((r) => r.id));
  });

  test.for([
    ["limit=0", "limit", "parameter_out_of_range"],
    ["limit=101", "limit", "parameter_out_of_range"],
    ["limit=1.5", "limit", "parameter_invalid"],
    ["limit=abc", "limit", "parameter_invalid"],
    ["limit=-1", "limit", "parameter_invalid"],
    ["limit=", "limit", "parameter_invalid"],
    ["limit=5&limit=6", "limit", "parameter_invalid"],
    ["status=bogus", "status", "parameter_invalid"],
    ["status=QUEUED", "status", "parameter_invalid"],
    ["since=yesterday", "since", "parameter_invalid"],
    ["since=2026-11-21", "since", "parameter_invalid"],
    ["since=2026-11-21T10:00:00", "since", "parameter_invalid"],
    ["since=2026-13-40T10:00:00Z", "since", "parameter_invalid"],
    ["until=soon", "until", "parameter_invalid"],
    ["since=0000-01-01T00:00:00Z", "since", "parameter_invalid"],
    ["until=0001-01-01T00:00:00%2B23:59", "until", "parameter_invalid"],
    ["since=9999-12-31T23:59:59-14:00", "since", "parameter_invalid"],
    ["colour=red", "colour", "parameter_unknown"],
    ["subscription_id=%00", "subscription_id", "parameter_invalid"],
    ["starting_after=dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", "starting_after", "resource_missing"],
    ["ending_before=nonsense", "ending_before", "resource_missing"],
  ])("rejects %s with a 400 naming the parameter", async ([query, param, code], { api, database, seed }) => {
    const response = await api.get(`/v1/deliveries?${query}`, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param, code });
    expect(response.body.error.message).toContain(param);
  });

  test.for([
    // Past 2^53 too: the same message as every other limit out of range.
    ["limit=99999999999999999999999", "limit", "parameter_out_of_range", "limit must be an integer between 1 and 100"],
    // Past what a double holds (Infinity): not a number at all.
    [`limit=${"9".repeat(400)}`, "limit", "parameter_invalid", "limit must be an integer between 1 and 100"],
    // An empty window, as POST /v1/subscriptions/{id}/recover refuses it.
    [
      "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z",
      "until",
      "parameter_invalid",
      "until must be later than since",
    ],
    [
      "since=2026-01-01T00:00:00Z&until=2026-01-01T00:00:00Z",
      "until",
      "parameter_invalid",
      "until must be later than since",
    ],
    [
      "since=2026-01-01T02:00:00%2B02:00&until=2026-01-01T00:00:00Z",
      "until",
      "parameter_invalid",
      "until must be later than since",
    ],
    // An empty filter is a form field left blank, not a filter that matches nothing.
    [
      "subscription_id=",
      "subscription_id",
      "parameter_invalid",
      "subscription_id must not be empty: leave it out to list the deliveries of every subscription",
    ],
    [
      "event=",
      "event",
      "parameter_invalid",
      "event must not be empty: leave it out to list the deliveries of every event type",
    ],
  ])("rejects %s with a 400 that says why", async ([query, param, code, message], { api, database, seed }) => {
    const response = await api.get(`/v1/deliveries?${query}`, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param, code, message });
  });

  test("rejects starting_after and ending_before together", async ({ api, database, seed }) => {
    const { rows } = seed;
    const response = await api.get(`/v1/deliveries?starting_after=${rows[5]!.id}&ending_before=${rows[1]!.id}`, 400);
    expect(response.body.error.code).toBe("parameter_conflict");
  });
});

describe("GET /v1/deliveries/{id}", () => {
  test("returns one delivery", async ({ api, database, seed }) => {
    const { rows } = seed;
    const row = rows[3]!;
    const response = await api.get(`/v1/deliveries/${row.id}`, 200, { schema: deliverySchema });
    expect(response.body).toMatchObject({
      id: row.id,
      object: "delivery",
      subscription_id: row.subscription_id,
      status: row.status,
      event: row.event_type,
    });
    expect(response.body.created_at).toBe(row.created_at.toISOString());
  });

  test("404s for unknown ids, also on attempts and retry", async ({ api, database, seed }) => {
    for (const path of ["", "/attempts"]) {
      const response = await api.get(`/v1/deliveries/dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q${path}`, 404);
      expect(response.body.error.code).toBe("resource_missing");
    }
    await api.post("/v1/deliveries/dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/retry", undefined, 404);
  });

  test("lists attempts as an empty list before any attempt", async ({ api, database, seed }) => {
    const { rows } = seed;
    const row = rows[0]!;
    const response = await api.get(`/v1/deliveries/${row.id}/attempts`, 200, { schema: attemptListSchema });
    expect(response.body).toEqual({
      object: "list",
      url: `/v1/deliveries/${row.id}/attempts`,
      has_more: false,
      data: [],
    });
  });

  test("shows duration_ms as null for an attempt in flight or with an unknown outcome", async ({
    api,
    database,
    seed,
  }) => {
    const { rows } = seed;
    // A failed delivery whose retry is being attempted; not the first of its status, which other tests use.
    const row = rows.filter((r) => r.status === "failed")[1]!;
    await sql(
      database.url,
      `
      INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code, error) VALUES
        ('att_01JD5V6Y7Z8X9W0V1U2T3S4R5A', $1, $2, 1, 'https://example.com/0', now() - interval '2 minutes', 120, 500, NULL),
        ('att_01JD5V6Y7Z8X9W0V1U2T3S4R5B', $1, $2, 2, 'https://example.com/0', now() - interval '1 minute', NULL, NULL, 'outcome unknown')`,
      [row.id, row.subscription_id],
    );
    // The attempt in flight is on the delivery's row until it ends (the claim puts it there).
    await sql(
      database.url,
      `
      UPDATE deliveries SET attempts = 3, open_attempt_id = 'att_01JD5V6Y7Z8X9W0V1A2T3S4R5C', open_attempt_started_at = now()
      WHERE id = $1`,
      [row.id],
    );
    const response = await api.get(`/v1/deliveries/${row.id}/attempts`, 200, { schema: attemptListSchema });
    expect(
      response.body.data.map((a: { id: string; number: number; duration_ms: number | null; error: string | null }) => [
        a.id,
        a.number,
        a.duration_ms,
        a.error,
      ]),
    ).toEqual([
      ["att_01JD5V6Y7Z8X9W0V1A2T3S4R5C", 3, null, null],
      ["att_01JD5V6Y7Z8X9W0V1U2T3S4R5B", 2, null, "outcome unknown"],
      ["att_01JD5V6Y7Z8X9W0V1U2T3S4R5A", 1, 120, null],
    ]);
    // Pages continue after the attempt in flight as after any other.
    const after = await api.get(
      `/v1/deliveries/${row.id}/attempts?limit=1&starting_after=att_01JD5V6Y7Z8X9W0V1A2T3S4R5C`,
      200,
      { schema: attemptListSchema },
    );
    expect(after.body.data.map((a: { number: number }) => a.number)).toEqual([2]);
    expect(after.body.has_more).toBe(true);

    // An attempt of another delivery is no cursor for this one.
    const other = rows.filter((r) => r.status === "failed")[2]!;
    const refused = await api.get(
      `/v1/deliveries/${other.id}/attempts?starting_after=att_01JD5V6Y7Z8X9W0V1A2T3S4R5C`,
      400,
    );
    expect(refused.body.error).toMatchObject({ code: "resource_missing", param: "starting_after" });
  });
});

describe("POST /v1/deliveries/{id}/retry", () => {
  test("queues a delivered or failed delivery again and puts its job on the queue", async ({ api, database, seed }) => {
    const { rows } = seed;
    for (const status of ["delivered", "failed"]) {
      const row = rows.find((r) => r.status === status)!;
      await api.queue.queue.remove(row.id);
      const response = await api.post(`/v1/deliveries/${row.id}/retry`, undefined, 202, { schema: deliverySchema });
      expect(response.body).toMatchObject({ id: row.id, status: "queued", next_retry_at: null });
      expect((await api.queue.queue.getJob(row.id))?.data).toEqual({ deliveryId: row.id });
    }
  });

  test("leaves a queued delivery as it is", async ({ api, database, seed }) => {
    const { rows } = seed;
    const row = rows.find((r) => r.status === "queued")!;
    const response = await api.post(`/v1/deliveries/${row.id}/retry`, undefined, 202, { schema: deliverySchema });
    expect(response.body).toMatchObject({ id: row.id, status: "queued", attempts: 0 });
  });
});
