import { startTestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { type PrivateRedis, sql, startPrivateRedis, testEnv, waitFor } from "@webhooks/testing";
import { Redis } from "ioredis";
import { describe, expect } from "vitest";
import { countByStatus, publishBurst } from "./burst.ts";
import { workerTest as it } from "./fixtures.ts";
import { publish, subscribe } from "./stack.ts";

/**
 * Redis losing its data stops no worker: an attempt already under way must still be sent once and
 * have its outcome recorded. Here a worker's attempt slots are all taken by requests to a slow
 * receiver while a dispatch's deliveries wait for a slot; Redis loses its data, so the reconciler
 * gives each waiting delivery a job of its own, which the same worker takes while the dispatch
 * still holds it. When the slow requests end, both copies of each delivery reach the claim in
 * the same turn: only one may send it.
 */
const LOSSES: { name: string; lose(redis: PrivateRedis): Promise<void> }[] = [
  {
    name: "flushed (FLUSHALL)",
    async lose(redis) {
      const admin = new Redis(redis.url);
      await admin.flushall().finally(() => admin.disconnect());
    },
  },
  {
    name: "restarted empty",
    async lose(redis) {
      await redis.stop();
      await redis.start();
    },
  },
];

describe("Redis losing its data while attempts are in flight", () => {
  it.for(LOSSES)(
    "$name: sends each delivery once and records every attempt's outcome",
    async (loss, { database, receiver, inProcessWorker, defer }) => {
      const redis = await startPrivateRedis();
      defer(() => redis.stop());
      const slots = 20;
      const env = testEnv(database.url, {
        REDIS_URL: redis.url,
        WORKER_CONCURRENCY: String(slots),
        DELIVERY_TIMEOUT: "10s",
        RECONCILE_INTERVAL: "300ms",
      });
      const api = await startTestApi(loadConfig(env));
      defer(() => api.close());
      // The slow requests are all answered at the same moment, so that their slots free together.
      let answerSlowAt: number | undefined;
      const rx = await receiver((webhook) => {
        if (!webhook.path.startsWith("/slow")) return { status: 200 };
        answerSlowAt ??= Date.now() + 5_000;
        return { status: 200, delayMs: Math.max(0, answerSlowAt - Date.now()) };
      });
      // One slow event to as many subscriptions as the worker has slots: one dispatch job fills them.
      for (let i = 0; i < slots; i++) {
        const slow = await subscribe(api, { url: `${rx.url}/slow-${i}`, events: ["slow.tick"] });
        rx.useSecret(`/slow-${i}`, slow.secret);
      }
      const fast = await subscribe(api, { url: `${rx.url}/fast`, events: ["fast.tick"] });
      rx.useSecret("/fast", fast.secret);
      await inProcessWorker(env);

      const slowEvent = await publish(api, { type: "slow.tick", data: {} });
      await waitFor(() => rx.concurrent === slots, { what: "every slot of the worker waiting on the slow receiver" });
      // The fast deliveries wait for a slot, in their dispatches.
      const fastEvents = await publishBurst(api, 5, { type: "fast.tick", concurrency: 5 });
      const fastDeliveries = (
        await sql<{ id: string }>(database.url, "SELECT id FROM deliveries WHERE subscription_id = $1", [fast.id])
      ).map((row) => row.id);
      expect(fastDeliveries).toHaveLength(5);

      await loss.lose(redis);
      // The reconciler gives each a job of its own, which the worker takes while their dispatches
      // still hold them.
      await waitFor(
        async () => {
          const jobs = await Promise.all(fastDeliveries.map((id) => api.queue.queueOf(id).getJob(id)));
          return (await Promise.all(jobs.map((job) => job?.isActive() ?? false))).every(Boolean);
        },
        { what: "a job of its own for each waiting delivery, taken by the worker" },
      );
      expect(rx.received.filter((webhook) => webhook.path === "/fast")).toHaveLength(0);

      await waitFor(async () => (await countByStatus(database.url)).delivered === slots + 5, {
        timeoutMs: 60_000,
        what: "every delivery delivered",
      });
      const requests = new Map<string, number>();
      for (const webhook of rx.received) {
        const key = `${webhook.path} ${String(webhook.headers["webhook-id"])}`;
        requests.set(key, (requests.get(key) ?? 0) + 1);
      }
      expect(requests.size).toBe(slots + 5);
      expect([...requests].filter(([, count]) => count !== 1)).toEqual([]);
      expect(new Set(rx.received.map((webhook) => String(webhook.headers["webhook-id"])))).toEqual(
        new Set([slowEvent.id, ...fastEvents]),
      );
      const attempts = await sql<{ number: number; response_code: number | null; error: string | null }>(
        database.url,
        "SELECT number, response_code, error FROM delivery_attempts",
      );
      expect(attempts).toHaveLength(slots + 5);
      expect(attempts.filter((a) => a.number !== 1 || a.response_code !== 200 || a.error !== null)).toEqual([]);
    },
  );
});
