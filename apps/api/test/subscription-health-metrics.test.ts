import { randomBytes } from "node:crypto";
import { startTestApi, subscribe, type TestApi } from "@webhooks/api/testing";
import { databaseUrl, sql, testConfig } from "@webhooks/testing";
import { describe, expect } from "vitest";
import {
  type CreateSubscriptionRequest,
  deletedSubscriptionSchema,
  subscriptionSchema,
} from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

// A database of its own: the gauges count every subscription in it.
const test = apiTest();

async function create(api: TestApi, body: Partial<CreateSubscriptionRequest> = {}): Promise<string> {
  return (await subscribe(api, { events: ["a.b"], ...body })).id;
}

async function scrape(from: TestApi): Promise<string> {
  const response = await from.call("GET", "/metrics", { key: null });
  expect(response.status).toBe(200);
  return response.body;
}

/** The samples of one metric: label value -> value. */
function samples(text: string, metric: string, label: string): Record<string, number> {
  const found: Record<string, number> = {};
  const line = new RegExp(`^${metric}\\{${label}="([^"]+)"\\} (\\S+)$`, "gm");
  for (const match of text.matchAll(line)) found[match[1] ?? ""] = Number(match[2]);
  return found;
}

describe("/metrics: endpoint health", () => {
  test("counts subscriptions by health and lists the held ones, from the database at each scrape", async ({
    api,
    database,
  }) => {
    await create(api);
    const paused = await create(api, { active: false });
    const recovered = await create(api);
    const failing = await create(api);
    const circuitOpen = await create(api);
    const retryAfter = await create(api);
    const disabled = await create(api);
    const deleted = await create(api);
    // As the workers leave them.
    await sql(database.url, "UPDATE subscriptions SET held_until = now() - interval '1 second' WHERE id = $1", [
      recovered,
    ]);
    await sql(
      database.url,
      "UPDATE subscriptions SET failing_since = now() - interval '1 minute', consecutive_failures = 2 WHERE id = $1",
      [failing],
    );
    await sql(
      database.url,
      "UPDATE subscriptions SET failing_since = now(), circuit_opened_at = now(), held_until = now() + interval '30 seconds' WHERE id = $1",
      [circuitOpen],
    );
    await sql(database.url, "UPDATE subscriptions SET held_until = now() + interval '1 hour' WHERE id = $1", [
      retryAfter,
    ]);
    await sql(
      database.url,
      "UPDATE subscriptions SET active = false, disabled_reason = 'gone', circuit_opened_at = now() WHERE id = $1",
      [disabled],
    );
    await sql(database.url, "UPDATE subscriptions SET circuit_opened_at = now() WHERE id = $1", [deleted]);
    await api.delete(`/v1/subscriptions/${deleted}`, 200, { schema: deletedSubscriptionSchema });

    const text = await scrape(api);
    // A subscription its owner paused is counted by its health; "disabled" is the service's doing.
    expect(samples(text, "webhook_subscriptions", "health")).toEqual({
      healthy: 3,
      failing: 1,
      circuit_open: 2,
      disabled: 1,
    });
    expect(samples(text, "webhook_subscription_circuit_open", "subscription_id")).toEqual({
      [circuitOpen]: 1,
      [retryAfter]: 1,
    });
    expect(text).not.toContain(paused);

    // Re-enabling closes the circuit and starts afresh: the next scrape counts it healthy.
    await api.put(`/v1/subscriptions/${circuitOpen}`, { active: true }, 200, { schema: subscriptionSchema });
    const after = await scrape(api);
    expect(samples(after, "webhook_subscriptions", "health")).toEqual({
      healthy: 4,
      failing: 1,
      circuit_open: 1,
      disabled: 1,
    });
    expect(samples(after, "webhook_subscription_circuit_open", "subscription_id")).toEqual({ [retryAfter]: 1 });
  });

  test("reports nothing for them, rather than failing the scrape, when the database is unreachable", async () => {
    const unreachable = await startTestApi(
      testConfig(databaseUrl(`webhooks_test_missing_${randomBytes(4).toString("hex")}`)),
    );
    try {
      const text = await scrape(unreachable);
      expect(text).toContain("# TYPE webhook_subscriptions gauge");
      expect(samples(text, "webhook_subscriptions", "health")).toEqual({});
      expect(samples(text, "webhook_subscription_circuit_open", "subscription_id")).toEqual({});
      expect(text).toMatch(/webhook_queue_jobs\{state="waiting"\} \d+/);
    } finally {
      await unreachable.close();
    }
  });
});
