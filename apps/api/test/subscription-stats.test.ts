import { subscribe, type TestApi } from "@webhooks/api/testing";
import { newId } from "@webhooks/core";
import { createApiKey } from "@webhooks/db";
import { sql, type TestDatabase } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { portalSessionSchema } from "../src/portal-sessions/schemas.ts";
import { subscriptionStatsSchema } from "../src/subscription-stats/schemas.ts";
import { apiTest } from "./fixtures.ts";
import { seedDeliveries } from "./seed-deliveries.ts";

// GET /v1/subscriptions/{id}/stats (docs/api.md#subscription-stats) on a log written straight into
// the tables, as a long-running service would have it; the worker's side of it (timeouts and
// network errors as it records them) is in subscription-stats-delivered.test.ts.

const at = (iso: string) => new Date(iso);
const DAY = "2026-01-10";

interface Attempt {
  startedAt: string;
  durationMs: number | null;
  responseCode?: number | null;
  timedOut?: boolean;
}

/** Attempts written as the worker records them (their delivery does not matter to the stats). */
async function seedAttempts(database: TestDatabase, subscriptionId: string, deliveryId: string, attempts: Attempt[]) {
  await sql(
    database.url,
    `INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code, timed_out, error)
     SELECT a.id, $2, $3, a.number, 'https://example.com/hooks', a.started_at, a.duration_ms, a.response_code, a.timed_out,
            CASE WHEN a.response_code IS NULL THEN 'some error' END
     FROM unnest($1::text[], $4::int[], $5::timestamptz[], $6::int[], $7::int[], $8::boolean[])
       AS a(id, number, started_at, duration_ms, response_code, timed_out)`,
    [
      attempts.map(() => newId("attempt")),
      deliveryId,
      subscriptionId,
      attempts.map((_, i) => i + 1),
      attempts.map((a) => a.startedAt),
      attempts.map((a) => a.durationMs),
      attempts.map((a) => a.responseCode ?? null),
      attempts.map((a) => a.timedOut ?? false),
    ],
  );
}

const test = apiTest().extend("world", { scope: "file" }, async ({ api, database }) => {
  const acme = await subscribe(api, { events: ["invoice.paid"], tenant_id: "acme" });
  const globex = await subscribe(api, { events: ["invoice.paid"], tenant_id: "globex" });
  const untenanted = await subscribe(api, { events: ["invoice.paid"] });
  const [first] = await seedDeliveries(database, acme.id, [
    { status: "delivered", createdAt: at(`${DAY}T00:00:00.000Z`) }, // since is inclusive
    { status: "delivered", createdAt: at(`${DAY}T00:30:00.000Z`) },
    { status: "failed", createdAt: at(`${DAY}T01:15:00.000Z`) },
    { status: "queued", createdAt: at(`${DAY}T05:00:00.000Z`) },
    { status: "failed", createdAt: at(`${DAY}T05:59:59.999Z`) },
    { status: "delivered", createdAt: at("2026-01-11T00:00:00.000Z") }, // until is exclusive
    { status: "failed", createdAt: at("2026-01-09T23:59:59.999Z") },
  ]);
  // 100 responses taking 1..100 ms: 90 2xx, one 3xx, two 4xx, seven 5xx. Then 3 timeouts, 4 network
  // errors and one of unknown outcome, none of which has a latency; and two attempts out of the window.
  const classOf = (ms: number) => (ms <= 90 ? 200 : ms === 91 ? 301 : ms <= 93 ? 404 : 503);
  await seedAttempts(database, acme.id, first!, [
    ...Array.from({ length: 100 }, (_, i) => ({
      startedAt: `${DAY}T03:${String(i % 60).padStart(2, "0")}:00Z`,
      durationMs: i + 1,
      responseCode: classOf(i + 1),
    })),
    ...Array.from({ length: 3 }, () => ({ startedAt: `${DAY}T04:00:00Z`, durationMs: 30_000, timedOut: true })),
    ...Array.from({ length: 4 }, () => ({ startedAt: `${DAY}T04:00:00Z`, durationMs: 5 })),
    { startedAt: `${DAY}T04:00:00Z`, durationMs: null },
    { startedAt: "2026-01-11T00:00:00.000Z", durationMs: 5000, responseCode: 200 },
    { startedAt: "2026-01-09T23:59:59.999Z", durationMs: 5000, responseCode: 200 },
  ]);
  // Another subscription's log in the same window counts only for it.
  const [other] = await seedDeliveries(database, globex.id, [{ status: "failed", createdAt: at(`${DAY}T02:00:00Z`) }]);
  await seedAttempts(database, globex.id, other!, [
    { startedAt: `${DAY}T02:00:00Z`, durationMs: 7, responseCode: 500 },
  ]);
  const { key } = await createApiKey({ db: api.db }, { name: "acme's key", tenantId: "acme" });
  const session = await api.post("/v1/portal_sessions", { tenant_id: "acme", expires_in: "1h" }, 201, {
    schema: portalSessionSchema,
  });
  return { acme: acme.id, globex: globex.id, untenanted: untenanted.id, acmeKey: key, acmeToken: session.body.token };
});

const statsOf = async (api: TestApi, id: string, query = "", key?: string) =>
  (await api.get(`/v1/subscriptions/${id}/stats${query}`, 200, { schema: subscriptionStatsSchema, key })).body;

const window = (since: string, until: string) =>
  `?since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}`;

describe("GET /v1/subscriptions/{id}/stats", () => {
  test("counts the window's deliveries by status and its attempts by class, with latency percentiles, hour by hour", async ({
    api,
    world,
  }) => {
    const stats = await statsOf(api, world.acme, window(`${DAY}T00:00:00Z`, "2026-01-11T00:00:00Z"));
    expect(stats).toMatchObject({
      object: "subscription_stats",
      subscription_id: world.acme,
      since: `${DAY}T00:00:00.000Z`,
      until: "2026-01-11T00:00:00.000Z",
      deliveries: { queued: 1, delivered: 2, failed: 2 },
      attempts: { total: 108, "2xx": 90, "3xx": 1, "4xx": 2, "5xx": 7, timeout: 3, network_error: 4 },
      latency_ms: { p50: 50, p95: 95, p99: 99 },
    });
    expect(stats.series).toHaveLength(24);
    expect(stats.series.map((point) => point.start)).toEqual(
      Array.from({ length: 24 }, (_, h) => `${DAY}T${String(h).padStart(2, "0")}:00:00.000Z`),
    );
    const busy = stats.series.filter((point) => point.delivered + point.failed > 0);
    expect(busy).toEqual([
      { start: `${DAY}T00:00:00.000Z`, delivered: 2, failed: 0 },
      { start: `${DAY}T01:00:00.000Z`, delivered: 0, failed: 1 },
      { start: `${DAY}T05:00:00.000Z`, delivered: 0, failed: 1 },
    ]);
  });

  test("starts the series at the hour since falls in, and counts only from since", async ({ api, world }) => {
    const stats = await statsOf(api, world.acme, window(`${DAY}T00:30:00Z`, `${DAY}T02:00:00Z`));
    expect(stats.deliveries).toEqual({ queued: 0, delivered: 1, failed: 1 });
    expect(stats.series).toEqual([
      { start: `${DAY}T00:00:00.000Z`, delivered: 1, failed: 0 },
      { start: `${DAY}T01:00:00.000Z`, delivered: 0, failed: 1 },
    ]);
  });

  test("goes by UTC day beyond 48 hours, and by hour up to 48 hours", async ({ api, world }) => {
    const daily = await statsOf(api, world.acme, window("2026-01-08T12:00:00Z", "2026-01-11T12:00:00Z"));
    expect(daily.deliveries).toEqual({ queued: 1, delivered: 3, failed: 3 });
    expect(daily.series).toEqual([
      { start: "2026-01-08T00:00:00.000Z", delivered: 0, failed: 0 },
      { start: "2026-01-09T00:00:00.000Z", delivered: 0, failed: 1 },
      { start: `${DAY}T00:00:00.000Z`, delivered: 2, failed: 2 },
      { start: "2026-01-11T00:00:00.000Z", delivered: 1, failed: 0 },
    ]);
    expect(daily.attempts.total).toBe(110);
    const twoDays = await statsOf(api, world.acme, window("2026-01-09T00:00:00Z", "2026-01-11T00:00:00Z"));
    expect(twoDays.series).toHaveLength(48);
    const justOver = await statsOf(api, world.acme, window("2026-01-09T00:00:00Z", "2026-01-11T00:00:00.001Z"));
    expect(justOver.series.map((point) => point.start)).toEqual([
      "2026-01-09T00:00:00.000Z",
      `${DAY}T00:00:00.000Z`,
      "2026-01-11T00:00:00.000Z",
    ]);
    const longest = await statsOf(api, world.acme, window("2025-12-15T00:00:00Z", "2026-01-15T00:00:00Z"));
    expect(longest.series).toHaveLength(31);
    expect(longest.deliveries).toEqual({ queued: 1, delivered: 3, failed: 3 });
  });

  test("answers zeros, null latencies and empty buckets for a window with nothing in it", async ({ api, world }) => {
    const stats = await statsOf(api, world.acme, window("2025-06-01T00:00:00Z", "2025-06-01T03:00:00Z"));
    expect(stats).toMatchObject({
      deliveries: { queued: 0, delivered: 0, failed: 0 },
      attempts: { total: 0, "2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0, timeout: 0, network_error: 0 },
      latency_ms: { p50: null, p95: null, p99: null },
    });
    expect(stats.series).toEqual(
      ["00", "01", "02"].map((h) => ({ start: `2025-06-01T${h}:00:00.000Z`, delivered: 0, failed: 0 })),
    );
  });

  test("covers the last 24 hours by default, and 24 hours up to until when only until is sent", async ({
    api,
    world,
  }) => {
    const before = Date.now();
    const stats = await statsOf(api, world.acme);
    const until = Date.parse(stats.until);
    expect(until).toBeGreaterThanOrEqual(before);
    expect(until - Date.parse(stats.since)).toBe(86_400_000);
    expect(stats.series.length).toBeGreaterThanOrEqual(24);
    const untilOnly = await statsOf(api, world.acme, `?until=${DAY}T12:00:00%2B02:00`);
    expect(untilOnly).toMatchObject({ since: "2026-01-09T10:00:00.000Z", until: `${DAY}T10:00:00.000Z` });
    expect(untilOnly.deliveries).toEqual({ queued: 1, delivered: 2, failed: 3 });
  });

  test.for([
    ["?since=yesterday", "parameter_invalid", "since"],
    [`?until=${DAY}`, "parameter_invalid", "until"],
    [window(`${DAY}T12:00:00Z`, `${DAY}T11:00:00Z`), "parameter_invalid", "until"],
    [window(`${DAY}T12:00:00Z`, `${DAY}T12:00:00Z`), "parameter_invalid", "until"],
    ["?since=2999-01-01T00:00:00Z", "parameter_invalid", "since"],
    [window("2025-12-15T00:00:00Z", "2026-01-15T00:00:00.001Z"), "parameter_out_of_range", "since"],
    [`?until=${DAY}T00:00:00Z&since=2025-01-01T00:00:00Z`, "parameter_out_of_range", "since"],
    [`?since=${new Date(Date.now() - 32 * 86_400_000).toISOString()}`, "parameter_out_of_range", "since"],
    ["?limit=5", "parameter_unknown", "limit"],
  ] as const)("answers 400 %s: %s on %s", async ([query, code, param], { api, world }) => {
    const response = await api.get(`/v1/subscriptions/${world.acme}/stats${query}`, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
    expect(response.body.error.message).toContain(param);
  });

  test("shows a tenant's credentials their own subscriptions only: another's is a 404, as an unknown id", async ({
    api,
    world,
  }) => {
    const day = window(`${DAY}T00:00:00Z`, "2026-01-11T00:00:00Z");
    for (const key of [world.acmeKey, world.acmeToken]) {
      expect((await statsOf(api, world.acme, day, key)).deliveries.delivered).toBe(2);
      for (const id of [world.globex, world.untenanted, "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q"]) {
        const hidden = await api.get(`/v1/subscriptions/${id}/stats${day}`, 404, { key });
        expect(hidden.body.error).toMatchObject({ type: "invalid_request_error", code: "resource_missing" });
      }
    }
    const globex = await statsOf(api, world.globex, day);
    expect(globex).toMatchObject({
      deliveries: { queued: 0, delivered: 0, failed: 1 },
      attempts: { total: 1, "5xx": 1 },
      latency_ms: { p50: 7, p95: 7, p99: 7 },
    });
    await api.get("/v1/subscriptions/not-an-id/stats", 404);
  });

  test("is a 404 for a deleted subscription, as its other reads are", async ({ api }) => {
    const gone = await subscribe(api, { events: ["invoice.paid"] });
    await statsOf(api, gone.id);
    expect((await api.call("DELETE", `/v1/subscriptions/${gone.id}`)).status).toBe(200);
    await api.get(`/v1/subscriptions/${gone.id}/stats`, 404);
  });
});
