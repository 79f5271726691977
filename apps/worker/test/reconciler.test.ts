import { Writable } from "node:stream";
import { createLogger, jobCatalog, type Logger, SecretBox } from "@webhooks/core";
import { createDatabase, createSubscription, publishEvents } from "@webhooks/db";
import { createRedisConnection, DeliveryGate, DeliveryQueue, dispatchJobId } from "@webhooks/queue";
import { REDIS_URL, sql, testQueuePrefix, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { createWorkerMetrics } from "../src/metrics.ts";
import { Reconciler } from "../src/reconciler.ts";
import { workerTest } from "./fixtures.ts";

/**
 * The reconciler's work per pass is proportional to what may be missing from Redis (what came
 * due since the last pass, and a bounded slice of a rolling sweep), not to the backlog; and it
 * still finds every delivery without a job.
 */
const prefix = testQueuePrefix();

/** `reconcilerSetUp`: a reconciler over the test's database and a queue prefix of its own, and one subscription to everything. */
const it = workerTest.extend("reconcilerSetUp", async ({ database: testDb, defer }) => {
  const database = createDatabase({ databaseUrl: testDb.url, poolSize: 4 });
  defer(() => database.close());
  const redis = createRedisConnection(REDIS_URL, "producer");
  defer(async () => redis.disconnect());
  const gateRedis = createRedisConnection(REDIS_URL, "gate");
  defer(async () => gateRedis.disconnect());
  const queue = new DeliveryQueue(redis, prefix);
  defer(() => queue.close());
  defer(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  });
  const metrics = createWorkerMetrics(queue);
  const newReconciler = (
    queue: DeliveryQueue,
    logger: Logger = createLogger({ level: "silent", name: "test" }),
    gate = new DeliveryGate(gateRedis, prefix),
  ) => new Reconciler({ sql: database.sql, queue, gate, logger, metrics }, 60_000);
  const reconciler = newReconciler(queue);
  await createSubscription(
    {
      db: database.prisma,
      secretBox: new SecretBox(Buffer.alloc(32, 5)),
      destinationPolicy: { allowHttp: true, allowPrivateNetworks: true },
      defaultMaxInFlight: 10,
    },
    { url: "https://example.com/backlog", events: ["*"] },
  );
  const publish = async (count: number): Promise<string[]> => {
    const results = await publishEvents(
      { sql: database.sql },
      Array.from({ length: count }, (_, i) => ({ type: "backlog.test", data: { i } })),
    );
    return results.flatMap((r) => (r instanceof Error ? [] : r.deliveryIds));
  };
  return { databaseUrl: testDb.url, redis, gateRedis, prefix, queue, metrics, reconciler, newReconciler, publish };
});

describe("the reconciler", () => {
  it("does not enqueue a delivery that ended while Redis was being asked about it", async ({
    reconcilerSetUp: { databaseUrl, redis, queue, newReconciler, publish },
    defer,
  }) => {
    const ids = await publish(3);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'");
    // Workers deliver all three between the reconciler's read and its question to Redis: their
    // rows are written first, then their finished jobs leave Redis (they never had one here).
    class DeliveredMeanwhile extends DeliveryQueue {
      override async inspect(deliveryIds: string[]): Promise<{ missing: string[]; late: string[] }> {
        await sql(
          databaseUrl,
          "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL WHERE id = ANY($1::text[])",
          [deliveryIds],
        );
        return super.inspect(deliveryIds);
      }
    }
    const racing = new DeliveredMeanwhile(redis, prefix);
    defer(() => racing.close());
    expect(await newReconciler(racing).reconcileOnce()).toEqual({
      scanned: 3,
      enqueued: 0,
      justDue: 0,
      promoted: 0,
      lineHeads: 0,
      full: true,
      orphansDropped: 0,
      saved: true,
    });
    expect(await queue.withoutJob(ids)).toEqual(ids);
  });

  it("warns of lost jobs, and logs deliveries that came due moments ago (perhaps still being enqueued by the API) at info", async ({
    reconcilerSetUp: { databaseUrl, queue, newReconciler, publish },
  }) => {
    const [lost, onTheirWay] = await publish(2);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes' WHERE id = $1", [
      lost,
    ]);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '2 seconds' WHERE id = $1", [
      onTheirWay,
    ]);
    const lines: { level: number; msg: string; enqueued: number }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    });
    const reconciler = newReconciler(queue, createLogger({ level: "info", name: "test", destination: sink }));
    reconciler.start();
    try {
      await waitFor(() => lines.length >= 2, { what: "the pass's two log lines" });
    } finally {
      await reconciler.stop();
    }
    expect(lines.map(({ level, msg, enqueued }) => ({ level, msg, enqueued }))).toEqual([
      { level: 40, msg: "reconciler enqueued deliveries whose job was lost", enqueued: 1 },
      { level: 30, msg: expect.stringContaining("came due in the last 30 s"), enqueued: 1 },
    ]);
    expect(await queue.withoutJob([lost!, onTheirWay!])).toEqual([]);
  });

  it("reports what a pass enqueued even when nudging the gate's lines fails in the same round", async ({
    reconcilerSetUp: { databaseUrl, gateRedis, prefix, queue, newReconciler, publish },
  }) => {
    const [lost] = await publish(1);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes' WHERE id = $1", [
      lost,
    ]);
    const lines: { level: number; msg: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    });
    class FailingNudges extends DeliveryGate {
      override async nudgeAll(): Promise<never> {
        throw new Error("Connection is closed.");
      }
    }
    const reconciler = newReconciler(
      queue,
      createLogger({ level: "info", name: "test", destination: sink }),
      new FailingNudges(gateRedis, prefix),
    );
    reconciler.start();
    try {
      await waitFor(() => lines.length >= 2, { what: "the round's two log lines" });
    } finally {
      await reconciler.stop();
    }
    // Before, the failed nudge failed the round: the enqueued delivery went unreported (and uncounted).
    expect(lines.map(({ level, msg }) => ({ level, msg }))).toEqual([
      { level: 40, msg: "could not nudge the gate's lines; will try again" },
      { level: 40, msg: "reconciler enqueued deliveries whose job was lost" },
    ]);
    expect(await queue.withoutJob([lost!])).toEqual([]);
  });

  it("counts what each page checked and enqueued as it goes, so a pass that fails midway still counts it", async ({
    reconcilerSetUp: { databaseUrl, redis, metrics, newReconciler, publish },
    defer,
  }) => {
    // Two pages of due deliveries without a job (a page is 500); Redis fails the second page's enqueue.
    await publish(501);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'");
    let enqueues = 0;
    class FailingSecondEnqueue extends DeliveryQueue {
      override async enqueue(deliveryIds: string[]): Promise<void> {
        if (++enqueues === 2) throw new Error("Connection is closed.");
        return super.enqueue(deliveryIds);
      }
    }
    const failing = new FailingSecondEnqueue(redis, prefix);
    defer(() => failing.close());
    const counted = async (counter: { get(): Promise<{ values: { value: number }[] }> }) =>
      (await counter.get()).values[0]?.value ?? 0;
    const [scannedBefore, enqueuedBefore] = [
      await counted(metrics.reconcilerScanned),
      await counted(metrics.reconcilerEnqueued),
    ];

    await expect(newReconciler(failing).reconcileOnce()).rejects.toThrow("Connection is closed.");
    expect((await counted(metrics.reconcilerScanned)) - scannedBefore).toBe(500);
    expect((await counted(metrics.reconcilerEnqueued)) - enqueuedBefore).toBe(500);
  });

  it("runs now a due delivery's job parked far past its time, and leaves one parked for its turn at the gate", async ({
    reconcilerSetUp: { databaseUrl, queue, reconciler, publish },
  }) => {
    const [late, atGate, soon] = await publish(3);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'");
    const { jobName } = jobCatalog.deliveries;
    // A resend that could not reach Redis left this one at its retry's time, an hour away.
    await queue.queue.add(jobName, { deliveryId: late! }, { jobId: late!, delay: 3_600_000 });
    // This one waits in its subscription's line, parked until its turn (or its fallback timer).
    await queue.queue.add(jobName, { deliveryId: atGate!, waited: true }, { jobId: atGate!, delay: 3_600_000 });
    // This one runs within a minute (a lease to wait out, say): not late.
    await queue.queue.add(jobName, { deliveryId: soon! }, { jobId: soon!, delay: 60_000 });

    expect(await reconciler.reconcileOnce()).toMatchObject({ scanned: 3, enqueued: 0, promoted: 1 });
    const states = await Promise.all(
      [late, atGate, soon].map(async (id) => (await queue.queue.getJob(id!))!.getState()),
    );
    expect(states).toEqual(["waiting", "delayed", "delayed"]);
  });

  it("leaves the deliveries a dispatch job holds to it, and enqueues those whose dispatch is gone", async ({
    reconcilerSetUp: { databaseUrl, queue, reconciler, publish },
  }) => {
    const [first, second, alone] = await publish(3);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'");
    await queue.dispatch([{ deliveryId: first! }, { deliveryId: second! }]);
    await queue.dispatch([{ deliveryId: alone! }]);
    // The second dispatch is dropped (BullMQ's own retries ran out), its delivery not done.
    await queue.queue.remove(dispatchJobId(alone!));

    expect(await reconciler.reconcileOnce()).toEqual({
      scanned: 3,
      enqueued: 1,
      justDue: 0,
      promoted: 0,
      lineHeads: 0,
      full: true,
      orphansDropped: 0,
      saved: true,
    });
    expect((await queue.queue.getJob(alone!))?.data).toEqual({ deliveryId: alone });
    expect(await queue.queue.getJob(first!)).toBeUndefined();
    expect(await queue.queue.getJob(second!)).toBeUndefined();
    // What the dropped dispatch left of its delivery went with it.
    expect(await queue.dispatching()).toBe(2);

    // A dropped dispatch whose deliveries are not due (delivered meanwhile, say) is never met by
    // the due deliveries' check: a pass's sample of the index finds what it left.
    await sql(
      databaseUrl,
      "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL WHERE id = ANY($1::text[])",
      [[first, second]],
    );
    await queue.queue.remove(dispatchJobId(first!));
    expect(await reconciler.reconcileOnce()).toMatchObject({ enqueued: 0, orphansDropped: 2 });
    expect(await queue.dispatching()).toBe(0);
  });

  it("checks a large backlog once, then only what came due, plus a bounded sweep", async ({
    reconcilerSetUp: { databaseUrl, redis, queue, reconciler, publish },
  }) => {
    // A backlog that came due ten minutes ago, and whose jobs Redis never got.
    const backlog = await publish(1_500);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'");

    // No watermark yet (a fresh Redis): everything is checked, and every delivery enqueued.
    expect(await reconciler.reconcileOnce()).toEqual({
      scanned: 1_500,
      enqueued: 1_500,
      justDue: 0,
      promoted: 0,
      lineHeads: 0,
      full: true,
      orphansDropped: 0,
      saved: true,
    });
    expect(await queue.withoutJob(backlog)).toEqual([]);

    // Nothing new came due: a pass checks only its slice of the sweep, whatever the backlog.
    expect(await reconciler.reconcileOnce()).toEqual({
      scanned: 1_000,
      enqueued: 0,
      justDue: 0,
      promoted: 0,
      lineHeads: 0,
      full: false,
      orphansDropped: 0,
      saved: true,
    });
    expect(await reconciler.reconcileOnce()).toEqual({
      scanned: 500,
      enqueued: 0,
      justDue: 0,
      promoted: 0,
      lineHeads: 0,
      full: false,
      orphansDropped: 0,
      saved: true,
    });

    // A delivery that comes due now, without a job, is found by the next pass at once. It came
    // due moments ago, so it is counted as just due (it may be on its way from the API), not lost.
    const [fresh] = await publish(1);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '2 seconds' WHERE id = $1", [
      fresh,
    ]);
    const pass = await reconciler.reconcileOnce();
    expect(pass?.enqueued).toBe(1);
    expect(pass?.justDue).toBe(1);
    expect(pass!.scanned).toBeLessThanOrEqual(1 + 1_000);
    expect(await queue.withoutJob([fresh!])).toEqual([]);

    // Jobs lost on their own (removed by hand): the sweep finds them within a round of passes.
    const lost = backlog.slice(700, 705);
    for (const id of lost) await queue.queue.remove(id);
    let found = 0;
    let justDue = 0;
    for (let i = 0; i < 3 && found < lost.length; i++) {
      const sweeping = await reconciler.reconcileOnce();
      found += sweeping?.enqueued ?? 0;
      justDue += sweeping?.justDue ?? 0;
    }
    expect(found).toBe(lost.length);
    // They came due ten minutes ago: lost jobs, not deliveries on their way.
    expect(justDue).toBe(0);
    expect(await queue.withoutJob(lost)).toEqual([]);

    // Redis lost its data (the watermark went with the jobs): the next pass checks everything.
    const keys = await redis.keys(`${prefix}:*`);
    await redis.del(...keys);
    expect(await reconciler.reconcileOnce()).toMatchObject({
      scanned: 1_501,
      enqueued: 1_501,
      full: true,
      orphansDropped: 0,
    });
  });

  it("leaves no watermark when Redis loses its data in the middle of a pass, so the next pass checks everything", async ({
    reconcilerSetUp: { databaseUrl, redis, prefix, queue, reconciler, newReconciler, publish },
    defer,
  }) => {
    const backlog = await publish(1_500);
    await sql(databaseUrl, "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'");
    expect(await reconciler.reconcileOnce()).toMatchObject({ enqueued: 1_500, full: true, saved: true });

    // Redis restarts empty while the next pass is under way (here: as its sweep asks about its
    // first page): the pass read a watermark before, and looks only at what came due since.
    let flushed = false;
    class FlushedMidPass extends DeliveryQueue {
      override async inspect(deliveryIds: string[]): Promise<{ missing: string[]; late: string[] }> {
        if (!flushed) {
          flushed = true;
          const keys = await redis.keys(`${prefix}:*`);
          await redis.del(...keys);
        }
        return super.inspect(deliveryIds);
      }
    }
    const flushing = new FlushedMidPass(redis, prefix);
    defer(() => flushing.close());
    // Its sweep re-enqueues the 1,000 it looked at; the other 500 lost their jobs unseen.
    expect(await newReconciler(flushing).reconcileOnce()).toMatchObject({
      scanned: 1_000,
      enqueued: 1_000,
      full: false,
      saved: false,
    });
    expect(flushed).toBe(true);
    expect((await queue.withoutJob(backlog)).length).toBe(500);

    // Had it saved its watermark, the next pass would look only at a slice of the sweep; it
    // finds no watermark instead, checks everything, and enqueues the 500.
    expect(await reconciler.reconcileOnce()).toMatchObject({ scanned: 1_500, enqueued: 500, full: true, saved: true });
    expect(await queue.withoutJob(backlog)).toEqual([]);
  });

  it("checks everything after a pass that found a shard's mark gone and failed before its end", async ({
    reconcilerSetUp: { redis, prefix, queue, reconciler, publish },
  }) => {
    await publish(3);
    expect(await reconciler.reconcileOnce()).toMatchObject({ full: true, saved: true });
    // One shard lost its data (the mark with it) while the state, elsewhere on a cluster, did not.
    await redis.del(`${prefix}:deliveries:reconciled`);
    // The pass that finds it begins by taking the state away, before it checks anything: if it
    // then fails midway, the pass after it is full too, although the mark is back.
    const { state } = await queue.beginReconcilerPass();
    expect(state).toBeUndefined();
    expect((await queue.beginReconcilerPass()).state).toBeUndefined();
  });
});
