import { subscribe, type TestApi } from "@webhooks/api/testing";
import { sql } from "@webhooks/testing";
import pg from "pg";
import { describe, expect } from "vitest";
import { deliveryListSchema } from "../src/deliveries/schemas.ts";
import type { CreateSubscriptionRequest } from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";
import { type SeedRow, seedDeliveries } from "./seed-deliveries.ts";

// Self-service operations (docs/api.md#subscriptions) through the API alone (no worker runs here,
// so queued deliveries stay queued). The end-to-end side (signatures during an overlap, headers on
// the wire, test events arriving) is in apps/worker/test/self-service.test.ts.

const test = apiTest();

const create = (api: TestApi, body: Partial<CreateSubscriptionRequest> = {}) =>
  subscribe(api, { events: ["invoice.paid"], ...body });

/** The delivery log's response_code filter: an exact code or a class, with the other filters, on an index. */
describe("GET /v1/deliveries?response_code=", () => {
  test("filters by an exact code or a class, alone and with subscription_id and status, paged to the end", async ({
    api,
    database,
  }) => {
    const a = await create(api);
    const b = await create(api);
    const base = Date.parse("2025-01-01T00:00:00.000Z");
    const codes = [200, 204, 301, 404, 410, 500, 503, null];
    const rowsFor = (offset: number): SeedRow[] =>
      Array.from({ length: 80 }, (_, i) => {
        const code = codes[i % codes.length]!;
        // Ten rows share each millisecond, so paging breaks ties by id.
        return {
          status: code === null ? "queued" : code < 300 ? "delivered" : "failed",
          responseCode: code,
          createdAt: new Date(base + offset + Math.floor(i / 10)),
        };
      });
    const seeded = [
      ...(await seedDeliveries(database, a.id, rowsFor(0))),
      ...(await seedDeliveries(database, b.id, rowsFor(0))),
    ];
    const all = await sql<{ id: string; subscription_id: string; response_code: number | null; status: string }>(
      database.url,
      "SELECT id, subscription_id, response_code, status::text AS status FROM deliveries WHERE id = ANY($1::text[]) ORDER BY created_at DESC, id DESC",
      [seeded],
    );
    const until = new Date(base + 1_000).toISOString();
    const expected = (keep: (row: (typeof all)[number]) => boolean) => all.filter(keep).map((row) => row.id);

    const cases: [string, (row: (typeof all)[number]) => boolean][] = [
      ["response_code=500", (r) => r.response_code === 500],
      ["response_code=5xx", (r) => r.response_code !== null && r.response_code >= 500],
      ["response_code=4XX", (r) => r.response_code === 404 || r.response_code === 410],
      ["response_code=2xx", (r) => r.response_code === 200 || r.response_code === 204],
      ["response_code=3xx", (r) => r.response_code === 301],
      ["response_code=204", (r) => r.response_code === 204],
      [`response_code=500&subscription_id=${a.id}`, (r) => r.response_code === 500 && r.subscription_id === a.id],
      [
        `response_code=5xx&subscription_id=${b.id}`,
        (r) => r.response_code !== null && r.response_code >= 500 && r.subscription_id === b.id,
      ],
      [
        `response_code=4xx&subscription_id=${a.id}&status=failed`,
        (r) => (r.response_code === 404 || r.response_code === 410) && r.subscription_id === a.id,
      ],
      [`response_code=2xx&status=failed`, () => false],
    ];
    for (const [query, keep] of cases) {
      const want = expected(keep);
      const got: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 50; page++) {
        const response = await api.call(
          "GET",
          `/v1/deliveries?${query}&until=${encodeURIComponent(until)}&limit=7${cursor ? `&starting_after=${cursor}` : ""}`,
        );
        expect(response.status, `${query}: ${JSON.stringify(response.body)}`).toBe(200);
        got.push(...response.body.data.map((d: { id: string }) => d.id));
        if (!response.body.has_more) break;
        cursor = response.body.data.at(-1).id;
      }
      expect(got, query).toEqual(want);
      // And back again from the end with ending_before.
      if (want.length > 7) {
        const back = await api.get(
          `/v1/deliveries?${query}&until=${encodeURIComponent(until)}&limit=7&ending_before=${want.at(-1)}`,
          200,
          { schema: deliveryListSchema },
        );
        expect(back.body.data.map((d: { id: string }) => d.id)).toEqual(want.slice(-8, -1));
      }
    }
  });

  test.for(["600", "99", "5x", "xx", "6xx", "1xx", "500,404", "", "abc", "50"])(
    "refuses response_code=%s",
    async (value, { api, database }) => {
      const response = await api.get(`/v1/deliveries?response_code=${encodeURIComponent(value)}`, 400);
      expect(response.body.error.param).toBe("response_code");
    },
  );

  test("uses an index in list order, without a sort, for each form", async ({ api, database }) => {
    const plans: string[] = [];
    for (const where of [
      "response_code = 500",
      "(response_code >= 500) AND (response_code < 600)",
      "subscription_id = 'sub_x' AND response_code = 404",
      "subscription_id = 'sub_x' AND (response_code >= 400) AND (response_code < 500)",
    ]) {
      // On a table this small the planner would rather read it all; what matters is that an
      // index gives this filter in list order, so that on a big one no sort is needed.
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      let rows: { "QUERY PLAN": string }[];
      try {
        await client.query("SET enable_seqscan = off");
        await client.query("SET enable_bitmapscan = off");
        rows = (
          await client.query(
            `EXPLAIN SELECT id FROM deliveries WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT 21`,
          )
        ).rows;
      } finally {
        await client.end();
      }
      plans.push(rows.map((row) => row["QUERY PLAN"]).join("\n"));
    }
    for (const plan of plans) {
      expect(plan).toMatch(/Index Scan|Index Only Scan/);
      expect(plan).not.toMatch(/Sort/);
    }
  });
});
