import { startTestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { startPrivateRedis, testEnv } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { apiTest } from "./fixtures.ts";

/**
 * What reads Redis on a request outside the publish path (the queue-depth gauge of /metrics, Bull
 * Board's JSON API) answers in bounded time and in the error shape when Redis is stalled
 * (frozen: connections open, nothing answered) or down. A Redis of the file's own, since these
 * freeze and kill it.
 */
const test = apiTest()
  .extend("redis", { scope: "file" }, async ({}, { onCleanup }) => {
    const redis = await startPrivateRedis();
    onCleanup(() => redis.stop());
    return redis;
  })
  .extend("outage", { scope: "file" }, async ({ database, redis }, { onCleanup }) => {
    const api = await startTestApi(
      loadConfig(testEnv(database.url, { REDIS_URL: redis.url, ADMIN_USERNAME: "admin", ADMIN_PASSWORD: "s3cret" })),
    );
    onCleanup(() => api.close());
    return { redis, api };
  });

const admin = { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` };

/** The time a request took and what it got. */
async function timed(url: string, headers: Record<string, string> = {}) {
  const started = Date.now();
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(20_000) });
  return { ms: Date.now() - started, status: response.status, headers: response.headers, text: await response.text() };
}

describe("with Redis stalled, then down", () => {
  test("the metrics scrape and the queue dashboard answer in seconds, in the error shape", async ({
    outage: { redis, api },
  }) => {
    const healthy = await timed(`${api.baseUrl}/admin/queues/api/queues`, admin);
    expect(healthy.status).toBe(200);

    redis.pause();
    try {
      // The scrape leaves the queue depth out after its 2 s deadline, and reports the rest.
      const metrics = await timed(`${api.baseUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.ms).toBeLessThan(5_000);
      expect(metrics.text).toContain("webhook_subscriptions{");
      expect(metrics.text).not.toMatch(/^webhook_queue_jobs\{/m);

      const board = await timed(`${api.baseUrl}/admin/queues/api/queues`, admin);
      expect(board.ms).toBeLessThan(8_000);
      expect(board.status).toBe(503);
      expect(board.headers.get("retry-after")).toBe("5");
      expect(JSON.parse(board.text)).toMatchObject({
        error: { type: "api_error", code: "service_unavailable", request_id: expect.stringMatching(/^req_/) },
      });
    } finally {
      redis.resume();
    }

    await redis.stop();
    const down = await timed(`${api.baseUrl}/admin/queues/api/queues`, admin);
    expect(down.status).toBe(503);
    expect(JSON.parse(down.text)).toMatchObject({ error: { type: "api_error", code: "service_unavailable" } });
    // Nothing of ioredis's own words.
    expect(down.text).not.toMatch(/writeable|ioredis|ECONNREFUSED/i);
  });
});
