import { publish, subscribe } from "@webhooks/api/testing";
import { freePort, sql, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { subscriptionStatsSchema } from "../src/subscription-stats/schemas.ts";
import { subscriptionSchema } from "../src/subscriptions/schemas.ts";
import { deliveringApiTest } from "./fixtures.ts";

// The stats (docs/api.md#subscription-stats) of attempts a real worker made: a success, a 500, a
// receiver too slow for DELIVERY_TIMEOUT and a closed port, each counted in its class. The retry
// schedule is long, so each delivery makes one attempt here.

const test = deliveringApiTest({ env: { DELIVERY_TIMEOUT: "2s", RETRY_SCHEDULE: "1h" } });

describe("GET /v1/subscriptions/{id}/stats, on what the worker recorded", () => {
  test("counts a 2xx, a 5xx, a timeout and a network error, and the latency of the two answers", async ({
    api,
    database,
    receiver,
  }) => {
    receiver.reply = (webhook) =>
      webhook.path === "/slow" ? { status: 200, delayMs: 10_000 } : { status: webhook.path === "/fail" ? 500 : 200 };
    const endpoint = await subscribe(api, { events: ["order.paid"], url: `${receiver.url}/ok` });
    // One subscription, its url changed between events: each delivery keeps the url it was created with.
    const urls = [`${receiver.url}/fail`, `${receiver.url}/slow`, `http://127.0.0.1:${await freePort()}/closed`];
    await publish(api, { type: "order.paid", data: { n: 0 } });
    for (const [n, url] of urls.entries()) {
      await api.put(`/v1/subscriptions/${endpoint.id}`, { url }, 200, { schema: subscriptionSchema });
      await publish(api, { type: "order.paid", data: { n: n + 1 } });
    }
    const stats = await waitFor(
      async () => {
        const { body } = await api.get(`/v1/subscriptions/${endpoint.id}/stats`, 200, {
          schema: subscriptionStatsSchema,
        });
        return body.attempts.total === 4 ? body : undefined;
      },
      { what: "four attempts recorded", timeoutMs: 60_000 },
    );
    expect(stats).toMatchObject({
      deliveries: { queued: 0, delivered: 1, failed: 3 },
      attempts: { total: 4, "2xx": 1, "3xx": 0, "4xx": 0, "5xx": 1, timeout: 1, network_error: 1 },
    });
    // Of the two that got an answer, not the timeout or the refused connection.
    const answered = await sql<{ ms: number }>(
      database.url,
      "SELECT duration_ms AS ms FROM delivery_attempts WHERE response_code IS NOT NULL ORDER BY 1",
    );
    expect(stats.latency_ms).toEqual({ p50: answered[0]!.ms, p95: answered[1]!.ms, p99: answered[1]!.ms });
    const lastHour = stats.series.at(-1)!;
    expect(lastHour).toMatchObject({ delivered: 1, failed: 3 });
  });
});
