import { createRedisConnection, DeliveryQueue, type RedisConnection, waitUntilConnected } from "@webhooks/queue";
import { withClient } from "@webhooks/testing";
import type pg from "pg";
import { onCleanup } from "../harness/cleanup.ts";
import { REDIS_URL } from "../harness/config.ts";
import { type CpuUsage, coresOf, cpuMsPer } from "../harness/cpu.ts";
import { deleteRunKeys, dropDatabase } from "../harness/databases.ts";
import { createUlidFunction, loadWithoutIndexes } from "../harness/seed-sql.ts";
import { pipelineSubscription, pipelineWorkerEnv, type Stack, startStack } from "../harness/stack.ts";
import { pct, round, seconds } from "../harness/stats.ts";
import { sleep, waitUntil, within } from "../harness/time.ts";
import { atScale, type Context, definePhase, table } from "../phase.ts";

const SETTINGS = {
  full: { deliveries: 1_000_000, reference: 30_000, idleMs: 40_000, drainMs: 60_000 },
  quick: { deliveries: 50_000, reference: 5_000, idleMs: 15_000, drainMs: 10_000 },
};
const SUBSCRIPTIONS = 10;
const TARGETS = { reconcilerCoreShare: 0.05, drainShare: 0.9 };

type Backlog = Awaited<ReturnType<typeof sitAndDrain>>;

/** Queued deliveries as a publish writes them: events from `fromMsAgo` to 10 minutes ago, each to every subscription. */
async function seedQueued(db: pg.Client, deliveries: number, fromMsAgo: number): Promise<void> {
  await createUlidFunction(db);
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM events"); // ids apart from an earlier seed's
  // The times as values, not from now(): each statement has its own, and the events' ids must match their deliveries'.
  const [from, to] = [new Date(Date.now() - fromMsAgo), new Date(Date.now() - 600_000)];
  const at = "date_trunc('milliseconds', $2::timestamptz + k * (($3::timestamptz - $2::timestamptz) / $1::int))";
  const params = [deliveries / SUBSCRIPTIONS, from.toISOString(), to.toISOString(), rows[0]!.n];
  await db.query(
    `INSERT INTO events (id, type, data, created_at)
     SELECT 'evt_' || pg_temp.ulid(t.at, $4::bigint + k), 'seeded', '{}', t.at
     FROM generate_series(0, $1::int - 1) AS k, LATERAL (SELECT ${at} AS at) AS t`,
    params,
  );
  await db.query(
    `WITH subs AS (SELECT row_number() OVER (ORDER BY id) - 1 AS slot, id, url, secret_id FROM subscriptions)
     INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, next_attempt_at, created_at, updated_at)
     SELECT 'dlv_' || pg_temp.ulid(t.at, ($4::bigint + k) * 1000 + s.slot), s.id, 'evt_' || pg_temp.ulid(t.at, $4::bigint + k),
            'seeded', s.url, s.secret_id, 'queued', t.at, t.at, t.at
     FROM generate_series(0, $1::int - 1) AS k, LATERAL (SELECT ${at} AS at) AS t, subs AS s`,
    params,
  );
}

/** Enqueues every queued delivery with the product's DeliveryQueue, as the API would, 1,000 at a time (each call has a deadline). */
async function enqueueQueued(databaseUrl: string, queue: DeliveryQueue): Promise<number> {
  return withClient(databaseUrl, async (db) => {
    const sql = "SELECT id, subscription_id FROM deliveries WHERE status = 'queued' AND id > $1 ORDER BY id LIMIT 1000";
    let [after, total] = ["", 0];
    for (;;) {
      const { rows } = await db.query<{ id: string; subscription_id: string }>(sql, [after]);
      if (rows.length === 0) return total;
      await queue.enqueue(
        rows.map((row) => row.id),
        new Map(rows.map((row) => [row.id, row.subscription_id])),
      );
      [after, total] = [rows.at(-1)!.id, total + rows.length];
    }
  });
}

/** Counts the reconciler's passes: each ends by saving a new watermark (polled from here, at no cost to the worker). */
function watchPasses(redis: RedisConnection, key: string) {
  let [passes, last, stopped] = [0, null as string | null, false];
  const watching = (async () => {
    for (; !stopped; await sleep(100)) {
      const watermark = await redis.hget(key, "watermark").catch(() => last);
      if (watermark !== null && watermark !== last) passes++;
      last = watermark;
    }
  })();
  const stop = onCleanup("stop watching the reconciler", async () => {
    stopped = true;
    await watching;
  });
  return { count: () => passes, stop };
}

const usedMemory = async (redis: RedisConnection) => Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);

/**
 * Enqueues the queued deliveries into the stack's paused queue (Redis memory per job), starts a
 * worker and times its first reconciler pass, watches it for `idleMs` (reconciler passes and CPU),
 * then resumes the queue until all the jobs are delivered or `drainMs` has passed.
 */
async function sitAndDrain(context: Context, stack: Stack, redis: RedisConnection, idleMs: number, drainMs: number) {
  const { receiver } = context;
  const queue = new DeliveryQueue(redis, stack.prefix);
  // A worker starting on a fresh queue finds no watermark: its first pass checks every due delivery.
  await redis.del(queue.layout.reconcilerKey);
  try {
    await queue.queue.pause();
    const [bytesBefore, enqueueStarted] = [await usedMemory(redis), performance.now()];
    const jobs = await enqueueQueued(stack.database.url, queue);
    const enqueueSeconds = (performance.now() - enqueueStarted) / 1000;
    const redisBytesPerJob = ((await usedMemory(redis)) - bytesBefore) / jobs;
    const [passes, started] = [watchPasses(redis, queue.layout.reconcilerKey), performance.now()];
    const worker = await stack.addWorker(`worker-${jobs}`, pipelineWorkerEnv(context.best.W10));
    if (!(await waitUntil(() => passes.count() > 0, 180_000, 100))) throw new Error("no reconciler pass in 180 s");
    const firstPassSeconds = (performance.now() - started) / 1000;
    let idle: { passes: number; cpu: CpuUsage } | undefined;
    if (idleMs > 0) {
      const [passesBefore, endCpu] = [passes.count(), stack.cpuWindow()];
      await sleep(idleMs);
      idle = { cpu: endCpu(), passes: passes.count() - passesBefore };
    }
    await passes.stop();

    receiver.resetCounts();
    const [all, endCpu, drainStarted] = [receiver.whenVerified(jobs), stack.cpuWindow(), performance.now()];
    await queue.queue.resume();
    const finishedAt = await within(all, drainMs);
    const cpu = endCpu();
    await queue.queue.pause();
    await worker.stop();
    const drainSeconds = ((finishedAt ?? performance.now()) - drainStarted) / 1000;
    const { verified, invalid, duplicates } = receiver;
    const drain = { deliveries: verified, seconds: drainSeconds, invalid, duplicates, cpu };
    return { jobs, enqueueSeconds, redisBytesPerJob, firstPassSeconds, idle, drain };
  } finally {
    await queue.close().catch(() => {});
  }
}

/**
 * A backlog of queued deliveries over the last two hours, enqueued into a paused queue: workers
 * stopped or far behind. First a small backlog, drained in full: the normal throughput.
 */
export const backlogPhase = definePhase({
  name: "backlog",
  title: "A backlog of queued deliveries",
  summary: "1,000,000 queued deliveries: Redis memory per job, the reconciler's CPU while they wait, the drain rate",
  async run(context) {
    const s = atScale(context.scale, SETTINGS);
    const redis = createRedisConnection(REDIS_URL, "producer");
    const disconnect = onCleanup("disconnect the backlog's Redis client", async () => redis.disconnect());
    const stack = await startStack(context, "backlog", { workers: 0 });
    try {
      await waitUntilConnected(redis);
      const subscription = pipelineSubscription(context.best.W10);
      for (let i = 0; i < SUBSCRIPTIONS; i++) await stack.subscribe(`/backlog/s${i}`, ["seeded"], subscription);
      await withClient(stack.database.url, (db) => seedQueued(db, s.reference, 1_200_000));
      const reference = await sitAndDrain(context, stack, redis, 0, 120_000);
      await withClient(stack.database.url, async (db) => {
        await loadWithoutIndexes(db, ["events", "deliveries"], () => seedQueued(db, s.deliveries, 7_200_000));
        await db.query("CHECKPOINT"); // the load's dirty pages are written now, not during the measurements
      });
      const backlog = await sitAndDrain(context, stack, redis, s.idleMs, s.drainMs);
      console.log(`  drained ${round(backlog.drain.deliveries / backlog.drain.seconds)}/s`);
      return { backlog, reference };
    } finally {
      await disconnect();
      await stack.stop();
      // A million jobs would sit in Redis, and a million rows on disk, until the end of the run.
      await deleteRunKeys(stack.prefix);
      await dropDatabase(stack.database.name);
    }
  },
  report({ backlog, reference }) {
    const rate = (x: Backlog) => x.drain.deliveries / x.drain.seconds;
    const share = (cpu: CpuUsage | undefined, label: string) => (cpu ? coresOf(cpu, [label]) : 0);
    const reconciler = share(backlog.idle?.cpu, "worker");
    const perDelivery = (x: Backlog) => cpuMsPer(x.drain.cpu, x.drain.deliveries, ["worker", "postgres"]).toFixed(2);
    const row = (name: string, x: Backlog) => ({
      backlog: name,
      "enqueued in": `${seconds(x.enqueueSeconds)}, ${round(x.redisBytesPerJob)} bytes of Redis per job`,
      "first reconciler pass over": `${seconds(x.firstPassSeconds)} after the worker's start`,
      "sitting: passes; worker, postgres, redis (share of a core)": x.idle
        ? `${x.idle.passes}; ${["worker", "postgres", "redis"].map((p) => pct(share(x.idle?.cpu, p), 1)).join(", ")}`
        : "-",
      "drained per second": round(rate(x)),
      "invalid / duplicates": `${x.drain.invalid} / ${x.drain.duplicates}`,
      "worker + postgres, ms of CPU per delivery": perDelivery(x),
    });
    return {
      tables: [
        table(`${SUBSCRIPTIONS} subscriptions`, [
          row(`${round(backlog.jobs)} jobs, drained for ${seconds(backlog.drain.seconds)}`, backlog),
          row(`reference: ${round(reference.jobs)} jobs, drained in full`, reference),
        ]),
      ],
      checks: [
        {
          figure: `Reconciler while ${round(backlog.jobs)} deliveries wait (the worker process, queue paused)`,
          measured: `${pct(reconciler, 1)} of one core, ${backlog.idle?.passes ?? 0} passes`,
          target: `< ${pct(TARGETS.reconcilerCoreShare)} of one core`,
          met: reconciler < TARGETS.reconcilerCoreShare && (backlog.idle?.passes ?? 0) > 0,
        },
        {
          figure: "Drain of the backlog once the workers take jobs again",
          measured: `${round(rate(backlog))}/s = ${pct(rate(backlog) / rate(reference))} of the normal ${round(rate(reference))}/s`,
          target: `>= ${pct(TARGETS.drainShare)} of the normal throughput`,
          met: rate(backlog) / rate(reference) >= TARGETS.drainShare && reference.drain.deliveries === reference.jobs,
        },
      ],
    };
  },
});
