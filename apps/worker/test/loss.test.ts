import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { loadConfig, withDeadline } from "@webhooks/core";
import {
  type PrivateRedis,
  type ReceivedWebhook,
  sql,
  startPrivateRedis,
  startTcpProxy,
  type TestDatabase,
  type TestReceiver,
  testEnv,
  waitFor,
} from "@webhooks/testing";
import { Redis } from "ioredis";
import { describe, expect } from "vitest";
import { attemptsByEvent, countByStatus, duplicates, publishBurst, recordedRetries } from "./burst.ts";
import { workerTest } from "./fixtures.ts";
import { subscribe } from "./stack.ts";

/**
 * "No accepted event is ever lost": Redis loses its data, a worker dies, Redis is down while
 * events are published. In every case each accepted event must end up delivered. Delivery is
 * at least once, so a receiver may see an event twice; the tests count and report that.
 * Each test gets a redis-server of its own, since flushing or stopping the shared one would
 * break the tests running beside it.
 */

interface Setup {
  database: TestDatabase;
  redis: PrivateRedis;
  env: Record<string, string>;
  api: TestApi;
  rx: TestReceiver;
}

/** `setup(overrides, reply)`: a Redis of the test's own, the API on it, and a receiver subscribed to everything. */
const it = workerTest.extend("setup", async ({ database, receiver, defer }) => {
  return async (overrides: Record<string, string> = {}, reply?: TestReceiver["reply"]): Promise<Setup> => {
    const redis = await startPrivateRedis();
    defer(() => redis.stop());
    // A generous timeout: on a busy 2-core machine a slow answer should not turn into a retry.
    const env = testEnv(database.url, {
      REDIS_URL: redis.url,
      RECONCILE_INTERVAL: "500ms",
      DELIVERY_TIMEOUT: "10s",
      ...overrides,
    });
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    const rx = await receiver(reply);
    const sub = await subscribe(api, { url: rx.url });
    rx.secrets.push(sub.secret);
    return { database, redis, env, api, rx };
  };
});

async function expectAllDelivered(s: Setup, eventIds: string[], label: string) {
  await waitFor(async () => (await countByStatus(s.database.url)).delivered === eventIds.length, {
    timeoutMs: 120_000,
    what: `${eventIds.length} deliveries delivered`,
  });
  const counts = s.rx.countsById();
  const dup = duplicates(counts);
  const retries = await recordedRetries(s.database.url);
  const logged = await attemptsByEvent(s.database.url);
  const unknown = [...logged.values()].reduce((sum, row) => sum + row.unknown, 0);
  console.log(
    `[${label}] ${counts.size}/${eventIds.length} events received; duplicates: ${dup.ids} events received more than once ` +
      `(${dup.extra} extra requests, ${retries} attempts beyond the first recorded, ${unknown} of them with an unknown outcome)`,
  );
  expect(await countByStatus(s.database.url)).toEqual({ delivered: eventIds.length });
  expect([...counts.keys()].sort()).toEqual([...eventIds].sort());
  expect(s.rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
  // The log never hides a send (docs/api.md#delivery-states). Every request the receiver saw is an
  // attempt in the delivery's count and in its log (a request whose worker died counts, with an
  // unknown outcome).
  const hidden = eventIds.filter((id) => (counts.get(id) ?? 0) > (logged.get(id)?.attempts ?? 0));
  expect(hidden).toEqual([]);
  expect([...logged.values()].every((row) => row.logged === row.attempts)).toBe(true);
  return { ...dup, unknown };
}

describe("no accepted event is ever lost", () => {
  it("when Redis is flushed in the middle of a 2,000-event burst", async ({ setup, inProcessWorker, defer }) => {
    const s = await setup({ WORKER_CONCURRENCY: "50" });
    await inProcessWorker(s.env);
    const admin = new Redis(s.redis.url);
    defer(async () => admin.disconnect());
    let flushed = false;
    const eventIds = await publishBurst(s.api, 2_000, {
      onProgress: async (published) => {
        if (published >= 700 && !flushed) {
          flushed = true;
          await admin.flushall();
        }
      },
    });
    expect(flushed).toBe(true);
    await expectAllDelivered(s, eventIds, "FLUSHALL mid-burst");
  });

  it("when a worker process is killed with SIGKILL in the middle of a burst", async ({ setup, workerProcess }) => {
    // A receiver slow enough that the worker always has requests in flight when it is killed.
    const s = await setup({ WORKER_CONCURRENCY: "20", JOB_LOCK_DURATION: "2s", DELIVERY_TIMEOUT: "3s" }, () => ({
      status: 200,
      delayMs: 50,
    }));
    const doomed = await workerProcess(s.env);
    let killed = false;
    const eventIds = await publishBurst(s.api, 1_000, {
      onProgress: async () => {
        if (!killed && s.rx.received.length >= 150) {
          killed = true;
          doomed.kill("SIGKILL");
          await doomed.exited;
        }
      },
    });
    await waitFor(() => killed || s.rx.received.length >= 150, { what: "the kill" });
    if (!killed) {
      doomed.kill("SIGKILL");
      await doomed.exited;
    }
    expect(await doomed.exited).toBe("SIGKILL");
    const delivered = (await countByStatus(s.database.url)).delivered ?? 0;
    expect(delivered).toBeLessThan(1_000);
    await workerProcess(s.env);
    const { unknown } = await expectAllDelivered(s, eventIds, "SIGKILL mid-burst");
    // The killed worker had requests in flight: their attempts were closed with an unknown outcome.
    expect(unknown).toBeGreaterThan(0);
  });

  it("when events are published while Redis is down", async ({ setup, inProcessWorker }) => {
    const s = await setup();
    await inProcessWorker(s.env);
    await s.redis.stop();
    const started = Date.now();
    const eventIds = await publishBurst(s.api, 100, { concurrency: 10 });
    // Accepted without waiting on Redis.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await countByStatus(s.database.url)).toEqual({ queued: 100 });
    expect(s.rx.received).toHaveLength(0);

    await s.redis.start();
    await expectAllDelivered(s, eventIds, "Redis down");
  });

  it("when the network path to Redis dies without a reset: the API and the worker drop their silent connections and make new ones", async ({
    setup,
    inProcessWorker,
    defer,
  }) => {
    const s = await setup();
    // The API and the worker reach Redis through a proxy whose open connections then go silent,
    // as when the Redis host is gone or failed over to another address: nothing answers, nothing
    // is closed. New connections go through, as they would to the new address.
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: s.redis.port });
    defer(() => proxy.close());
    const env = { ...s.env, REDIS_URL: `redis://127.0.0.1:${proxy.port}`, REDIS_SOCKET_TIMEOUT: "15s" };
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    await inProcessWorker(env);
    const before = await publishBurst(api, 5, { concurrency: 5 });
    await waitFor(async () => (await countByStatus(s.database.url)).delivered === 5, {
      what: "the first events delivered",
    });

    proxy.blackhole();
    // Accepted all the same: the enqueue gives up after its deadline, and the event is committed.
    const during = await publishBurst(api, 20, { concurrency: 10 });
    // Without a socket timeout the worker would wait for the kernel to give up on its
    // connections, a quarter of an hour; with it, they are made again after 15 s.
    await waitFor(async () => (await countByStatus(s.database.url)).delivered === 25, {
      timeoutMs: 60_000,
      what: "every event delivered through new connections",
    });
    await expectAllDelivered(s, [...before, ...during], "silent network path");

    // The API's connection was made again too (the reconciler alone would have delivered the
    // events it could not enqueue): it answers. (What it answers may count entries of dispatches
    // the API gave up on, which the reconciler clears later: only the answer matters here.)
    expect(await withDeadline(api.queue.dispatching(), 5_000, "the API's Redis")).toBeGreaterThanOrEqual(0);
  });

  it("when the worker's network path to PostgreSQL dies without a reset: its statements give up after DATABASE_QUERY_TIMEOUT, and new connections carry on", async ({
    setup,
    inProcessWorker,
    defer,
  }) => {
    const s = await setup();
    // The worker reaches PostgreSQL through a proxy whose open connections then go silent, as
    // when the database host is gone or failed over to another address. The API does not.
    const database = new URL(s.database.url);
    const proxy = await startTcpProxy({ host: database.hostname, port: Number(database.port || 5432) });
    defer(() => proxy.close());
    database.port = String(proxy.port);
    await inProcessWorker({ ...s.env, DATABASE_URL: database.toString(), DATABASE_QUERY_TIMEOUT: "3s" });
    const before = await publishBurst(s.api, 5, { concurrency: 5 });
    await waitFor(async () => (await countByStatus(s.database.url)).delivered === 5, {
      what: "the first events delivered",
    });

    proxy.blackhole();
    const during = await publishBurst(s.api, 20, { concurrency: 10 });
    // Without the timeout, every connection of the worker's pools would hang its statement until
    // the kernel gives up on it, a quarter of an hour.
    await waitFor(async () => (await countByStatus(s.database.url)).delivered === 25, {
      timeoutMs: 60_000,
      what: "every event delivered through new connections",
    });
    await expectAllDelivered(s, [...before, ...during], "silent path to PostgreSQL");
  });

  it("when a resend and a recover are accepted while Redis does not answer: the reconciler runs the jobs they could not bring forward", async ({
    setup,
    inProcessWorker,
  }) => {
    // Each event's first request fails, and its retry is an hour away.
    const seen = new Set<string>();
    const idOf = (webhook: ReceivedWebhook) => String(webhook.headers["webhook-id"]);
    const s = await setup({ RETRY_SCHEDULE: "1h" }, (webhook) => {
      const first = !seen.has(idOf(webhook));
      seen.add(idOf(webhook));
      return { status: first ? 500 : 200 };
    });
    await inProcessWorker(s.env);
    const [resent, recovered] = await publishBurst(s.api, 2, { concurrency: 1 });
    await waitFor(async () => (await countByStatus(s.database.url)).failed === 2, {
      what: "both failed, their retry an hour away",
    });
    const deliveryOf = async (eventId: string) =>
      (
        await sql<{ id: string; subscription_id: string }>(
          s.database.url,
          "SELECT id, subscription_id FROM deliveries WHERE event_id = $1",
          [eventId],
        )
      )[0]!;
    const [d1, d2] = [await deliveryOf(resent!), await deliveryOf(recovered!)];
    const subscriptionId = d1.subscription_id;

    // Redis freezes: both are accepted (committed in PostgreSQL), and neither job could be promoted.
    s.redis.pause();
    try {
      expect((await s.api.call("POST", `/v1/deliveries/${d1.id}/retry`)).status).toBe(202);
      const recovery = await s.api.call("POST", `/v1/subscriptions/${subscriptionId}/recover`, {
        json: { since: "2020-01-01T00:00:00Z" },
      });
      expect(recovery).toMatchObject({ status: 202, body: { deliveries: 1 } });
    } finally {
      s.redis.resume();
    }
    await waitFor(async () => (await countByStatus(s.database.url)).delivered === 2, {
      timeoutMs: 20_000,
      what: `${d1.id} and ${d2.id} delivered, not in an hour`,
    });
    expect(s.rx.received.map(idOf).sort()).toEqual([resent, resent, recovered, recovered].sort());
  });

  it("when the worker cannot reach PostgreSQL: its jobs are parked, spending none of their BullMQ attempts, and go once it is back", async ({
    setup,
    inProcessWorker,
    defer,
  }) => {
    // The reconciler runs once at the start and not again: it must not be what brings the jobs back.
    const s = await setup({ RECONCILE_INTERVAL: "10m" });
    const target = new URL(s.database.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    defer(() => proxy.close());
    const throughProxy = new URL(s.database.url);
    throughProxy.port = String(proxy.port);
    await inProcessWorker({ ...s.env, DATABASE_URL: throughProxy.href });

    // PostgreSQL goes away for the worker (the API still reaches it, and accepts).
    await proxy.refuse();
    const eventIds = await publishBurst(s.api, 20, { concurrency: 5 });
    const ids = (await sql<{ id: string }>(s.database.url, "SELECT id FROM deliveries")).map((row) => row.id);
    expect(ids).toHaveLength(20);
    const jobs = async () => Promise.all(ids.map((id) => s.api.queue.queueOf(id).getJob(id)));
    // Each job was taken, met the outage and was parked; BullMQ's own retries (5, then the job is
    // dropped) were not touched.
    await waitFor(async () => (await jobs()).every((job) => job !== undefined && job.processedOn !== undefined), {
      what: "every job taken once",
    });
    await waitFor(
      async () => {
        const all = await jobs();
        return (await Promise.all(all.map((job) => job!.isDelayed()))).every(Boolean) ? all : undefined;
      },
      { what: "every job parked" },
    );
    expect((await jobs()).map((job) => job!.attemptsMade)).toEqual(Array(20).fill(0));
    expect(s.rx.received).toHaveLength(0);

    await proxy.accept();
    await expectAllDelivered(s, eventIds, "PostgreSQL unreachable");
  });
});
