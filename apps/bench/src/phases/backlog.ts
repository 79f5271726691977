import { createRedisConnection, DeliveryQueue, waitUntilConnected } from "@webhooks/queue";
import { type TestReceiver, withClient } from "@webhooks/testing";
import type pg from "pg";
import { ApiClient } from "../api-client.ts";
import { onCleanup } from "../cleanup.ts";
import { type CpuTarget, type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { deleteRunKeys, dropDatabase, dropIdleDatabases, freshDatabase } from "../databases.ts";
import { createUlidFunction, loadWithoutIndexes } from "../seed-sql.ts";
import { sleep, startApi } from "../services.ts";
import { REDIS_URL, RUN_PREFIX, SCALE_DATABASES, settings } from "../settings.ts";
import { startWatchedWorker, type WatchedWorker } from "../worker-process.ts";
import { EVENT_TYPE, reportServiceOutput, subscriptionSettings, type WorkerSetup, workerEnv } from "./throughput.ts";

export interface DrainRun {
  deliveries: number;
  seconds: number;
  perSecond: number;
  timedOut: boolean;
  cpu: CpuUsage;
}

export interface BacklogResult extends WorkerSetup {
  deliveries: number;
  seedSeconds: number;
  enqueueSeconds: number;
  /** Redis INFO used_memory before and after the backlog was enqueued. */
  redisBytesBefore: number;
  redisBytesAfter: number;
  /** The worker's first pass after its start: no watermark yet, so it checks every due delivery. */
  firstPass: { seconds: number; scanned: number; enqueued: number; cpu: CpuUsage };
  /** The backlog sitting: the worker runs, its queue paused, its reconciler passing every 10 s. */
  idle: { seconds: number; passes: number; scanned: number; enqueued: number; cpu: CpuUsage };
  /** The queue resumed: deliveries verified by the receiver within the window, per 10 s slice too. */
  drain: DrainRun & { slices: number[]; invalidSignatures: number; duplicates: number; cpu: CpuUsage };
  /** The normal throughput: a small backlog drained in full by the same setup. */
  reference: DrainRun;
}

const SCANNED = "webhook_reconciler_scanned_total";
const ENQUEUED = "webhook_reconciler_enqueued_total";

/**
 * Phase 6: a backlog of 1,000,000 queued deliveries. The deliveries are seeded with SQL as
 * POST /v1/events writes them (an event and one queued delivery per subscription, over the last
 * two hours), and enqueued with the product's DeliveryQueue (one job per delivery, addBulk) into
 * a paused queue: the state of workers that are stopped or far behind (pausing is what Bull
 * Board's pause button does). A worker process then runs with its reconciler at the default
 * interval while the backlog sits; its CPU, and PostgreSQL's and Redis's, are read from /proc.
 * Then the queue is resumed and the drain rate measured over a fixed window, against the rate at
 * which the same setup drains a small backlog of the same shape (the normal throughput).
 */
export async function measureBacklog(receiver: TestReceiver, setup: WorkerSetup): Promise<BacklogResult> {
  const s = settings.backlog;
  await dropIdleDatabases(`webhooks_bench_backlog_`);
  const databaseUrl = await freshDatabase(SCALE_DATABASES.backlog);
  const keyPrefix = `${RUN_PREFIX}-backlog`;
  const redis = createRedisConnection(REDIS_URL, "producer");
  const disconnect = onCleanup("disconnect the backlog's Redis client", async () => redis.disconnect());
  const queues: DeliveryQueue[] = [];
  try {
    await waitUntilConnected(redis);
    await createSubscriptions(databaseUrl, keyPrefix, receiver, setup);

    console.log(`  reference: ${s.referenceDeliveries.toLocaleString("en-US")} queued deliveries drained in full`);
    const referenceQueue = new DeliveryQueue(redis, `${keyPrefix}-reference`);
    queues.push(referenceQueue);
    const now = Date.now();
    await withClient(databaseUrl, (db) =>
      seedQueued(db, {
        deliveries: s.referenceDeliveries,
        from: new Date(now - 20 * 60_000),
        to: new Date(now - 15 * 60_000),
        offset: 0,
      }),
    );
    const reference = await drainInFull(
      databaseUrl,
      `${keyPrefix}-reference`,
      referenceQueue,
      receiver,
      setup,
      s.referenceDeliveries,
    );
    console.log(
      `  reference drain: ${reference.deliveries} in ${reference.seconds.toFixed(1)} s = ${Math.round(reference.perSecond)}/s${reference.timedOut ? " (TIMED OUT)" : ""}; ` +
        describeDrainCpu(reference),
    );

    const queue = new DeliveryQueue(redis, keyPrefix);
    queues.push(queue);
    const seedStarted = performance.now();
    await withClient(databaseUrl, (db) =>
      loadWithoutIndexes(db, ["events", "deliveries"], () =>
        seedQueued(db, {
          deliveries: s.deliveries,
          from: new Date(now - s.spanMs),
          to: new Date(now - 10 * 60_000),
          offset: 1_000_000,
        }),
      ),
    );
    const seedSeconds = (performance.now() - seedStarted) / 1000;
    // The load's dirty pages are written now, not by a checkpoint in the middle of the measurements.
    await withClient(databaseUrl, (db) => db.query("CHECKPOINT"));
    console.log(`  seeded ${s.deliveries.toLocaleString("en-US")} queued deliveries in ${seedSeconds.toFixed(1)} s`);

    await queue.queue.pause();
    const redisBytesBefore = await usedMemory(redis);
    const enqueueStarted = performance.now();
    const enqueued = await enqueueQueued(databaseUrl, queue);
    const enqueueSeconds = (performance.now() - enqueueStarted) / 1000;
    const redisBytesAfter = await usedMemory(redis);
    console.log(
      `  enqueued ${enqueued.toLocaleString("en-US")} jobs in ${enqueueSeconds.toFixed(1)} s (paused queue); Redis used_memory ` +
        `${mb(redisBytesBefore)} -> ${mb(redisBytesAfter)} = ${Math.round((redisBytesAfter - redisBytesBefore) / enqueued)} bytes per waiting delivery`,
    );

    const passes = watchPasses(redis, queue.layout.reconcilerKey);
    const stopWatching = onCleanup("stop watching the reconciler", () => passes.stop());
    // The CPU window opens before the start, so that the first pass is in it whenever it begins.
    const firstPassStarted = performance.now();
    // Targets are matched when the window closes, so the worker's group can be filled in once it runs.
    const firstPassWorker: CpuTarget = { label: "worker (including its start)" };
    const endFirstPass = startCpuWindow([
      firstPassWorker,
      postgresTarget([SCALE_DATABASES.backlog]),
      { label: "redis", command: "redis-server" },
    ]);
    const worker = await startWatchedWorker("backlog-worker", databaseUrl, keyPrefix, workerEnv(setup));
    firstPassWorker.processGroup = worker.processGroup;
    let result: BacklogResult;
    try {
      await passes.waitForPasses(1, s.firstPassTimeoutMs);
      const firstPassCpu = endFirstPass();
      const firstPass = {
        seconds: (performance.now() - firstPassStarted) / 1000,
        scanned: await worker.counter(SCANNED),
        enqueued: await worker.counter(ENQUEUED),
        cpu: firstPassCpu,
      };
      console.log(
        `  first pass after the start (no watermark: checks everything): ${firstPass.scanned.toLocaleString("en-US")} checked, ` +
          `${firstPass.enqueued} enqueued, ${firstPass.seconds.toFixed(1)} s from the start`,
      );

      const idleStarted = performance.now();
      const passesBefore = passes.count();
      const scannedBefore = await worker.counter(SCANNED);
      const enqueuedBefore = await worker.counter(ENQUEUED);
      const endIdle = startCpuWindow(cpuTargets(worker));
      await sleep(s.idleMs);
      const idleCpu = endIdle();
      const idle = {
        seconds: (performance.now() - idleStarted) / 1000,
        passes: passes.count() - passesBefore,
        scanned: (await worker.counter(SCANNED)) - scannedBefore,
        enqueued: (await worker.counter(ENQUEUED)) - enqueuedBefore,
        cpu: idleCpu,
      };
      const workerCores = idleCpu.cores[0]?.cores ?? 0;
      console.log(
        `  backlog sitting for ${idle.seconds.toFixed(0)} s: ${idle.passes} passes, ${idle.scanned} checked (${Math.round(idle.scanned / Math.max(1, idle.passes))} per pass), ` +
          `${idle.enqueued} enqueued; worker ${(workerCores * 100).toFixed(2)}% of one core = ${((workerCores * idle.seconds * 1000) / Math.max(1, idle.passes)).toFixed(0)} ms of CPU per pass; ` +
          `postgres ${((idleCpu.cores[1]?.cores ?? 0) * 100).toFixed(2)}%, redis ${((idleCpu.cores[2]?.cores ?? 0) * 100).toFixed(2)}%`,
      );

      receiver.resetCounts();
      const endDrain = startCpuWindow(cpuTargets(worker));
      const drainStarted = performance.now();
      await queue.queue.resume();
      const slices: number[] = [];
      let previous = 0;
      for (let elapsed = 0; elapsed < s.drainMs; elapsed += 10_000) {
        await sleep(Math.min(10_000, s.drainMs - elapsed));
        slices.push(receiver.verified - previous);
        previous = receiver.verified;
      }
      const drainSeconds = (performance.now() - drainStarted) / 1000;
      const delivered = receiver.verified;
      const drainCpu = endDrain();
      await queue.queue.pause();
      const drain = {
        deliveries: delivered,
        seconds: drainSeconds,
        perSecond: delivered / drainSeconds,
        timedOut: false,
        slices,
        invalidSignatures: receiver.invalid,
        duplicates: receiver.duplicates,
        cpu: drainCpu,
      };
      console.log(
        `  drain: ${delivered.toLocaleString("en-US")} delivered in ${drainSeconds.toFixed(0)} s = ${Math.round(drain.perSecond)}/s ` +
          `(per 10 s: ${slices.map((n) => Math.round(n / 10)).join(", ")}/s); reference ${Math.round(reference.perSecond)}/s; ` +
          `invalid signatures ${drain.invalidSignatures}, duplicates ${drain.duplicates}; ${describeDrainCpu(drain)}`,
      );
      result = {
        ...setup,
        deliveries: enqueued,
        seedSeconds,
        enqueueSeconds,
        redisBytesBefore,
        redisBytesAfter,
        firstPass,
        idle,
        drain,
        reference,
      };
    } finally {
      await stopWatching();
      await worker.stop();
      reportServiceOutput([worker]);
    }
    return result;
  } finally {
    await Promise.all(queues.map((queue) => queue.close().catch(() => {})));
    await disconnect();
    // A million jobs would sit in Redis, and a million rows on disk, until the end of the run.
    const deleted = await deleteRunKeys(keyPrefix);
    console.log(`  deleted ${deleted.toLocaleString("en-US")} Redis keys of the phase`);
    await dropDatabase(SCALE_DATABASES.backlog);
  }
}

function cpuTargets(worker: WatchedWorker): CpuTarget[] {
  return [
    { label: "worker", processGroup: worker.processGroup },
    postgresTarget([SCALE_DATABASES.backlog]),
    { label: "redis", command: "redis-server" },
  ];
}

/** CPU per delivery, by process, and how busy the machine was: tells a slower drain from a busier machine. */
export function describeDrainCpu(run: DrainRun): string {
  const perDelivery = run.cpu.cores
    .map((c) => `${c.label} ${((c.cores * run.cpu.seconds * 1000) / Math.max(1, run.deliveries)).toFixed(2)}`)
    .join(", ");
  const others = run.cpu.others.map((o) => `${o.command} ${o.cores.toFixed(2)}`).join(", ");
  return `ms of CPU per delivery: ${perDelivery}; machine ${run.cpu.machineCores.toFixed(2)} cores busy; others: ${others}`;
}

/** The phase's subscriptions, through the API (their secrets are real, and the receiver verifies them). */
async function createSubscriptions(
  databaseUrl: string,
  keyPrefix: string,
  receiver: TestReceiver,
  setup: WorkerSetup,
): Promise<void> {
  const api = await startApi(databaseUrl, keyPrefix);
  const client = new ApiClient(api.baseUrl, 1);
  try {
    for (let i = 0; i < settings.backlog.subscriptions; i++) {
      const path = `/backlog/s${i}`;
      const subscription = await client.createSubscription(
        `${receiver.url}${path}`,
        [EVENT_TYPE],
        subscriptionSettings(setup),
      );
      receiver.useSecret(path, subscription.secret);
    }
  } finally {
    await client.close();
    await api.stop();
  }
}

/**
 * Queued deliveries as publishEvent writes them: `deliveries / subscriptions` events spread evenly
 * between `from` and `to`, each with one queued delivery per subscription, due since its creation.
 * `offset` keeps the ids of separate calls apart.
 */
async function seedQueued(
  db: pg.Client,
  input: { deliveries: number; from: Date; to: Date; offset: number },
): Promise<void> {
  await createUlidFunction(db);
  const { rows } = await db.query<{ count: number }>("SELECT count(*)::int AS count FROM subscriptions");
  const subscriptions = rows[0]!.count;
  const events = Math.ceil(input.deliveries / subscriptions);
  const at = "date_trunc('milliseconds', $2::timestamptz + k * (($3::timestamptz - $2::timestamptz) / $1::int))";
  const params = [events, input.from.toISOString(), input.to.toISOString(), input.offset];
  await db.query(
    `INSERT INTO events (id, type, data, created_at)
     SELECT 'evt_' || pg_temp.ulid(t.at, $4::bigint + k), '${EVENT_TYPE}',
            jsonb_build_object('invoice_id', 'in_' || ($4::bigint + k), 'amount_due', 4200, 'currency', 'usd'), t.at
     FROM generate_series(0, $1::int - 1) AS k, LATERAL (SELECT ${at} AS at) AS t`,
    params,
  );
  await db.query(
    `WITH subs AS (SELECT row_number() OVER (ORDER BY id) - 1 AS slot, id, url, secret_id FROM subscriptions)
     INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, next_attempt_at, created_at, updated_at)
     SELECT 'dlv_' || pg_temp.ulid(t.at, ($4::bigint + k) * $5::int + s.slot), s.id, 'evt_' || pg_temp.ulid(t.at, $4::bigint + k),
            '${EVENT_TYPE}', s.url, s.secret_id, 'queued', t.at, t.at, t.at
     FROM generate_series(0, $1::int - 1) AS k, LATERAL (SELECT ${at} AS at) AS t, subs AS s`,
    [...params, subscriptions],
  );
  await db.query("ANALYZE events, deliveries");
}

/** Enqueues every queued delivery with the product's DeliveryQueue, as the API does after a publish. */
async function enqueueQueued(databaseUrl: string, queue: DeliveryQueue): Promise<number> {
  const { enqueueChunk, enqueueInFlight } = settings.backlog;
  return withClient(databaseUrl, async (db) => {
    let after = "";
    let total = 0;
    const inFlight = new Set<Promise<void>>();
    for (;;) {
      const { rows } = await db.query<{ id: string; subscription_id: string }>(
        "SELECT id, subscription_id FROM deliveries WHERE status = 'queued' AND id > $1 ORDER BY id LIMIT $2",
        [after, enqueueChunk],
      );
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.id;
      total += rows.length;
      const adding: Promise<void> = queue
        .enqueue(
          rows.map((row) => row.id),
          new Map(rows.map((row) => [row.id, row.subscription_id])),
        )
        .finally(() => inFlight.delete(adding));
      inFlight.add(adding);
      if (inFlight.size >= enqueueInFlight) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    return total;
  });
}

/** Enqueues the queued deliveries into a paused queue, starts a worker, then resumes and times the drain to the last one. */
async function drainInFull(
  databaseUrl: string,
  queuePrefix: string,
  queue: DeliveryQueue,
  receiver: TestReceiver,
  setup: WorkerSetup,
  deliveries: number,
): Promise<DrainRun> {
  await queue.queue.pause();
  await enqueueQueued(databaseUrl, queue);
  const worker = await startWatchedWorker("reference-worker", databaseUrl, queuePrefix, workerEnv(setup));
  try {
    // Let its first pass (a full check) finish, so that it is not part of the drain, as in the big one.
    const redis = createRedisConnection(REDIS_URL, "producer");
    try {
      const passes = watchPasses(redis, queue.layout.reconcilerKey);
      await passes.waitForPasses(1, settings.backlog.firstPassTimeoutMs).finally(() => passes.stop());
    } finally {
      redis.disconnect();
    }
    receiver.resetCounts();
    const endCpu = startCpuWindow(cpuTargets(worker));
    const started = performance.now();
    const all = receiver.whenVerified(deliveries);
    await queue.queue.resume();
    let timer: NodeJS.Timeout | undefined;
    const finishedAt = await Promise.race([
      all,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 120_000))),
    ]);
    clearTimeout(timer);
    const cpu = endCpu();
    const seconds = ((finishedAt ?? performance.now()) - started) / 1000;
    const delivered = finishedAt === undefined ? receiver.verified : deliveries;
    return { deliveries: delivered, seconds, perSecond: delivered / seconds, timedOut: finishedAt === undefined, cpu };
  } finally {
    await worker.stop();
    reportServiceOutput([worker]);
  }
}

/**
 * Counts the reconciler's passes: each one ends by saving a new watermark in Redis. Polled every
 * 100 ms from this process, which costs the worker nothing.
 */
function watchPasses(redis: ReturnType<typeof createRedisConnection>, key: string) {
  let passes = 0;
  let last: string | null = null;
  let stopped = false;
  const waiters: { count: number; resolve: () => void }[] = [];
  const watching = (async () => {
    while (!stopped) {
      const watermark = await redis.hget(key, "watermark").catch(() => last);
      if (watermark !== null && watermark !== last) {
        passes++;
        last = watermark;
        for (const waiter of waiters.filter((w) => passes >= w.count)) waiter.resolve();
      }
      await sleep(100);
    }
  })();
  return {
    count: () => passes,
    async waitForPasses(count: number, timeoutMs: number): Promise<void> {
      if (passes >= count) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => waiters.push({ count, resolve })),
        new Promise<never>(
          (_, reject) =>
            (timer = setTimeout(
              () => reject(new Error(`the reconciler made no pass within ${timeoutMs} ms`)),
              timeoutMs,
            )),
        ),
      ]).finally(() => clearTimeout(timer));
    },
    async stop(): Promise<void> {
      stopped = true;
      await watching;
    },
  };
}

async function usedMemory(redis: ReturnType<typeof createRedisConnection>): Promise<number> {
  const info = await redis.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
