import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import {
  type PrivateRedis,
  type ReceivedWebhook,
  type Reply,
  startPrivateRedis,
  type TestDatabase,
  type TestReceiver,
  testEnv,
  waitFor,
} from "@webhooks/testing";
import { Redis } from "ioredis";
import { describe, expect } from "vitest";
import { countByStatus } from "./burst.ts";
import { workerTest } from "./fixtures.ts";
import { publish, subscribe } from "./stack.ts";

/**
 * Ordered delivery (docs/api.md#ordered-delivery) through the API, against a receiver that records
 * what arrives in which order: one at a time, in the order of publication, across worker
 * processes, through retries, a worker killed mid-attempt and Redis losing its data. Each test
 * has a redis-server of its own, since flushing the shared one would break the tests beside it.
 */

interface Setup {
  database: TestDatabase;
  redis: PrivateRedis;
  env: Record<string, string>;
  api: TestApi;
  rx: TestReceiver;
  subscriptionId: string;
  /** Publishes events named `names` one after the other, each once the previous was answered; returns their ids. */
  publishInOrder(names: string[]): Promise<string[]>;
}

const it = workerTest.extend("setup", async ({ database, receiver, defer }) => {
  return async (
    reply: (name: string, webhook: ReceivedWebhook) => Reply,
    overrides: Record<string, string> = {},
  ): Promise<Setup> => {
    const redis = await startPrivateRedis();
    defer(() => redis.stop());
    const env = testEnv(database.url, {
      REDIS_URL: redis.url,
      RECONCILE_INTERVAL: "500ms",
      DELIVERY_TIMEOUT: "10s",
      ...overrides,
    });
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    const rx = await receiver((webhook) => reply(nameOf(webhook), webhook));
    const subscription = await subscribe(api, { url: rx.url, events: ["ordered.event"], ordering: "fifo" });
    expect(subscription.ordering).toBe("fifo");
    rx.secrets.push(subscription.secret);
    const publishInOrder = async (names: string[]) => {
      const ids: string[] = [];
      for (const name of names) ids.push((await publish(api, { type: "ordered.event", data: { name } })).id);
      return ids;
    };
    return { database, redis, env, api, rx, subscriptionId: subscription.id, publishInOrder };
  };
});

const nameOf = (webhook: ReceivedWebhook): string => String(webhook.json.data.name ?? webhook.json.type);
const names = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}${i}`);
/** What the receiver saw, by name, in order of arrival. */
const arrivals = (s: Setup): string[] => s.rx.received.map(nameOf);

async function expectAllDelivered(s: Setup, count: number) {
  await waitFor(async () => (await countByStatus(s.database.url)).delivered === count, {
    timeoutMs: 120_000,
    what: `${count} deliveries delivered`,
  });
  expect(s.rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
}

/**
 * In publication order: the arrivals, a repeat of the same event allowed only right after itself
 * (at least once: an attempt whose worker died is sent again), are exactly the events published.
 */
function expectInOrder(s: Setup, published: string[]) {
  const seen = arrivals(s).filter((name, i, all) => i === 0 || all[i - 1] !== name);
  expect(seen).toEqual(published);
}

/** Waits a moment in which a delivery out of order would have arrived, were the order not kept. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 2_000));

describe("ordered delivery", () => {
  it("goes one at a time in publication order across two worker processes", async ({ setup, workerProcess }) => {
    const s = await setup(() => ({ status: 200, delayMs: 20 }), { WORKER_CONCURRENCY: "20" });
    // Half published before any worker runs, so that the workers find many deliveries due at once.
    const published = await s.publishInOrder(names("e", 20));
    await workerProcess(s.env);
    await workerProcess(s.env);
    published.push(...(await s.publishInOrder(names("e", 40).slice(20))));
    await expectAllDelivered(s, 40);
    expectInOrder(s, names("e", 40));
    expect(published).toHaveLength(40);
    expect(s.rx.maxConcurrent).toBe(1);
  });

  it("holds the deliveries behind one that waits for its retry", async ({ setup, inProcessWorker }) => {
    let failures = 0;
    const s = await setup(
      (name) => {
        if (name === "e2" && failures < 2) {
          failures++;
          return { status: 503 };
        }
        return { status: 200 };
      },
      { RETRY_SCHEDULE: "1s,1s,1s" },
    );
    await inProcessWorker(s.env);
    await inProcessWorker(s.env);
    await s.publishInOrder(names("e", 8));
    await expectAllDelivered(s, 8);
    expect(arrivals(s)).toEqual(["e0", "e1", "e2", "e2", "e2", "e3", "e4", "e5", "e6", "e7"]);
    expect(s.rx.maxConcurrent).toBe(1);
  });

  it("keeps the order when a worker is killed with SIGKILL mid-attempt", async ({ setup, workerProcess }) => {
    let doomed: Awaited<ReturnType<typeof workerProcess>> | undefined;
    const s = await setup(
      (name) => {
        // The worker dies while this request is in flight: its lease must expire before anyone
        // else may go, and then this one goes again, before the rest.
        if (name === "e5" && doomed) {
          doomed.kill("SIGKILL");
          doomed = undefined;
          return { status: 200, delayMs: 300 };
        }
        return { status: 200, delayMs: 10 };
      },
      { JOB_LOCK_DURATION: "2s", DELIVERY_TIMEOUT: "3s" },
    );
    doomed = await workerProcess(s.env);
    const killed = doomed;
    await s.publishInOrder(names("e", 12));
    await waitFor(() => doomed === undefined, { timeoutMs: 60_000, what: "the kill" });
    expect(await killed.exited).toBe("SIGKILL");
    await workerProcess(s.env);
    await expectAllDelivered(s, 12);
    expectInOrder(s, names("e", 12));
    expect(s.rx.maxConcurrent).toBe(1);
  });

  it("keeps the order when Redis loses its data mid-run", async ({ setup, inProcessWorker, defer }) => {
    let flush: (() => void) | undefined;
    const s = await setup((name) => {
      if (name === "e10") flush?.();
      return { status: 200, delayMs: 10 };
    });
    const admin = new Redis(s.redis.url);
    defer(async () => admin.disconnect());
    let flushed = false;
    flush = () => {
      flush = undefined;
      void admin.flushall().then(() => (flushed = true));
    };
    await inProcessWorker(s.env);
    await inProcessWorker(s.env);
    await s.publishInOrder(names("e", 30));
    await expectAllDelivered(s, 30);
    expect(flushed).toBe(true);
    expectInOrder(s, names("e", 30));
    expect(s.rx.maxConcurrent).toBe(1);
  });

  it("sends resends, recoveries and test events at once, outside the order; switching releases and orders", async ({
    setup,
    inProcessWorker,
  }) => {
    const failing = new Set(["e0", "f0"]);
    const s = await setup((name) => ({ status: failing.has(name) ? 500 : 200 }), { RETRY_SCHEDULE: "1h" });
    await inProcessWorker(s.env);
    const eIds = await s.publishInOrder(names("e", 5));
    const delivery = async (eventId: string) => {
      const list = await s.api.call("GET", `/v1/deliveries?subscription_id=${s.subscriptionId}&limit=100`);
      return list.body.data.find((d: { event_id: string }) => d.event_id === eventId);
    };
    // e0 fails and waits an hour for its retry; the rest wait behind it.
    await waitFor(async () => (await delivery(eIds[0]!))?.next_retry_at != null, { what: "e0's retry planned" });
    await settle();
    expect(arrivals(s)).toEqual(["e0"]);

    // A resend of e3 and a test event go at once; e1, e2 and e4 still wait.
    expect((await s.api.call("POST", `/v1/deliveries/${(await delivery(eIds[3]!)).id}/retry`)).status).toBe(202);
    await waitFor(() => arrivals(s).includes("e3"), { what: "the resent e3" });
    expect((await s.api.call("POST", `/v1/subscriptions/${s.subscriptionId}/test`, { json: {} })).status).toBe(202);
    await waitFor(() => arrivals(s).includes("webhook.test"), { what: "the test event" });
    await settle();
    expect(arrivals(s)).toEqual(["e0", "e3", "webhook.test"]);

    // Switching to none releases them at once, e0 still waiting for its retry.
    const none = await s.api.call("PUT", `/v1/subscriptions/${s.subscriptionId}`, { json: { ordering: "none" } });
    expect(none.body.ordering).toBe("none");
    await waitFor(() => ["e1", "e2", "e4"].every((name) => arrivals(s).includes(name)), { what: "the released ones" });
    expect(arrivals(s).filter((name) => name === "e0")).toEqual(["e0"]);

    // Back to fifo: new events form a line, held by f0 until a recover sends it, outside the order.
    const fifo = await s.api.call("PUT", `/v1/subscriptions/${s.subscriptionId}`, { json: { ordering: "fifo" } });
    expect(fifo.body.ordering).toBe("fifo");
    const before = arrivals(s).length;
    const fIds = await s.publishInOrder(names("f", 4));
    await waitFor(async () => (await delivery(fIds[0]!))?.next_retry_at != null, { what: "f0's retry planned" });
    await settle();
    expect(arrivals(s).slice(before)).toEqual(["f0"]);
    failing.delete("f0");
    const since = new Date(Date.now() - 60_000).toISOString();
    // e0 is failed too (waiting for its retry): the recover resends it as well, outside any order.
    const recovered = await s.api.call("POST", `/v1/subscriptions/${s.subscriptionId}/recover`, { json: { since } });
    expect(recovered.body.deliveries).toBe(2);
    await waitFor(() => ["f1", "f2", "f3"].every((name) => arrivals(s).includes(name)), { what: "the f line" });
    // f0 left the line when recovered: it may arrive before or after f1; the line went in order.
    const fLine = arrivals(s)
      .slice(before)
      .filter((name) => name.startsWith("f"));
    expect(fLine.filter((name) => name !== "f0")).toEqual(["f1", "f2", "f3"]);
    expect(fLine.filter((name) => name === "f0")).toHaveLength(2);
  });
});
