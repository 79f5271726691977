import { randomBytes } from "node:crypto";
import { createTestDatabase, databaseUrl, sql, testConfig, type TestDatabase } from "@webhooks/testing";
import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A database of its own: the gauges count every subscription in it.
let database: TestDatabase;
let api: TestApi;

beforeAll(async () => {
  database = await createTestDatabase();
  api = await startTestApi(testConfig(database.url));
});
afterAll(async () => {
  await api.close();
  await database.drop();
});

async function create(body: Record<string, unknown> = {}): Promise<string> {
  const response = await api.call("POST", "/v1/subscriptions", { json: { url: "https://example.com/hooks", events: ["a.b"], ...body } });
  expect(response.status).toBe(201);
  return response.body.id;
}

async function scrape(from: TestApi = api): Promise<string> {
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

describe("/metrics: endpoint health (contract §11)", () => {
  it("counts subscriptions by health and lists the held ones, from the database at each scrape", async () => {
    await create();
    const paused = await create({ active: false });
    const recovered = await create();
    const failing = await create();
    const circuitOpen = await create();
    const retryAfter = await create();
    const disabled = await create();
    const deleted = await create();
    // As the workers leave them.
    await sql(database.url, "UPDATE subscriptions SET held_until = now() - interval '1 second' WHERE id = $1", [recovered]);
    await sql(database.url, "UPDATE subscriptions SET failing_since = now() - interval '1 minute', consecutive_failures = 2 WHERE id = $1", [failing]);
    await sql(database.url, "UPDATE subscriptions SET failing_since = now(), circuit_opened_at = now(), held_until = now() + interval '30 seconds' WHERE id = $1", [circuitOpen]);
    await sql(database.url, "UPDATE subscriptions SET held_until = now() + interval '1 hour' WHERE id = $1", [retryAfter]);
    await sql(database.url, "UPDATE subscriptions SET active = false, disabled_reason = 'gone', circuit_opened_at = now() WHERE id = $1", [disabled]);
    await sql(database.url, "UPDATE subscriptions SET circuit_opened_at = now() WHERE id = $1", [deleted]);
    expect((await api.call("DELETE", `/v1/subscriptions/${deleted}`)).status).toBe(200);

    const text = await scrape();
    // A subscription its owner paused is counted by its health; "disabled" is the service's doing.
    expect(samples(text, "webhook_subscriptions", "health")).toEqual({ healthy: 3, failing: 1, circuit_open: 2, disabled: 1 });
    expect(samples(text, "webhook_subscription_circuit_open", "subscription_id")).toEqual({ [circuitOpen]: 1, [retryAfter]: 1 });
    expect(text).not.toContain(paused);

    // Re-enabling closes the circuit and starts afresh: the next scrape counts it healthy.
    expect((await api.call("PUT", `/v1/subscriptions/${circuitOpen}`, { json: { active: true } })).status).toBe(200);
    const after = await scrape();
    expect(samples(after, "webhook_subscriptions", "health")).toEqual({ healthy: 4, failing: 1, circuit_open: 1, disabled: 1 });
    expect(samples(after, "webhook_subscription_circuit_open", "subscription_id")).toEqual({ [retryAfter]: 1 });
  });

  it("reports nothing for them, rather than failing the scrape, when the database is unreachable", async () => {
    const unreachable = await startTestApi(testConfig(databaseUrl(`webhooks_test_missing_${randomBytes(4).toString("hex")}`)));
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
