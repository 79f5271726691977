import { randomBytes } from "node:crypto";

/**
 * Every figure the benchmark uses, in one place, so a reader can see what was measured and a
 * reviewer can see that nothing is tuned per run.
 */
export const settings = {
  /** Phase 1: 10 subscriptions x 2,000 events = 20,000 deliveries per configuration. */
  throughput: {
    subscriptions: 10,
    events: 2_000,
    /** Delivered deliveries already in the log when a run starts (see phases/history-seed.ts). */
    historyDeliveries: 50_000,
    /**
     * Closed-loop publishers keep this many deliveries on their way at once, in both workloads:
     * 16 requests of 10 deliveries in W10, 160 requests of one in W1 (see publishersFor). So the
     * two differ only in how the deliveries are packed into requests. With 16 requests in W1 as
     * well, the API's batches carried ~6 events and W1 reached ~55% of the ceiling; phase 4b
     * still measures that, beside the verdict's setup.
     */
    deliveriesInFlight: 160,
    /** Configurations tried: worker processes x WORKER_CONCURRENCY. */
    configurations: [
      { workers: 1, concurrency: 50 },
      { workers: 1, concurrency: 100 },
      { workers: 2, concurrency: 25 },
      { workers: 2, concurrency: 50 },
    ],
    /** A configuration that has not finished by then is reported as timed out. */
    timeoutMs: 90_000,
  },
  /** Phase 2: open loop, one event every 2 ms for 10 s, after a 2 s warm-up that is not counted. */
  latency: {
    ratePerSecond: 500,
    /** Not a target: the same measurement at a rate well below capacity, to show the floor. */
    diagnosticRatePerSecond: 100,
    durationMs: 10_000,
    warmupMs: 2_000,
    /** Undici queues requests beyond this; their wait counts in the latency (open loop). */
    connections: 64,
    /** How long to wait, after the last send, for deliveries still on their way. */
    drainTimeoutMs: 60_000,
  },
  /** Phase 3: GET /v1/deliveries on 1,000,000 rows. */
  list: {
    subscriptions: 100,
    events: 100_000,
    deliveriesPerEvent: 10,
    requestsPerCase: 300,
    /** Rows skipped before the deep-page cursor, in newest-first order. */
    deepOffset: 900_000,
  },
  /** Phase 4: the bare BullMQ + undici + pg loop. */
  ceiling: {
    jobs: 20_000,
    timeoutMs: 120_000,
  },
  /** Phase 4b: W1 and the bare ceiling back to back, this many times (the verdict reads the median). */
  w1Share: {
    rounds: 3,
  },
  /** A shorter extra run of phase 1, profiled (perf, or node --cpu-prof without it). */
  profile: {
    events: 2_000,
    timeoutMs: 90_000,
    /** perf starts this long after the first publish. */
    perfDelayMs: 1_000,
  },
  /**
   * Phase 5: one healthy subscription beside 10 bad ones, at the service's default settings. The
   * healthy one gets type A at `healthyRatePerSecond`, first alone, then beside type B at
   * `noiseRatePerSecond`, which 5 hanging and 5 erroring subscriptions receive (10 deliveries per B).
   */
  noisyNeighbour: {
    healthyRatePerSecond: 50,
    noiseRatePerSecond: 10,
    hangingReceivers: 5,
    erroringReceivers: 5,
    /** Sent at the healthy rate before part 1, not counted. */
    warmupMs: 2_000,
    /**
     * Part 1: the healthy subscription alone. As long as part 2, so that the two p99s compared
     * are the same order statistic (the 10th slowest of 1,000): with 10 s alone, part 1's p99 was
     * the 5th slowest of 500, and moved by half between runs of the same code (14.6 and 22.0 ms).
     */
    aloneMs: 20_000,
    /** Part 2: the healthy subscription beside the noise. */
    besideMs: 20_000,
    /** After each part's last send, how long the healthy webhooks still have to arrive. */
    drainMs: 5_000,
    connections: 64,
    /** Between parts 1 and 2: how soon a waiting delivery starts once its subscription's one slot frees. */
    handoff: { deliveries: 200, serviceMs: 10, timeoutMs: 30_000 },
  },
  /**
   * Phase 6: a backlog of 1,000,000 queued deliveries (10 subscriptions x 100,000 events), built up
   * over `spanMs` while the workers took no job, then drained.
   */
  backlog: {
    deliveries: 1_000_000,
    subscriptions: 10,
    spanMs: 2 * 3_600_000,
    /** The normal throughput: a small backlog of the same shape, drained in full by the same setup. */
    referenceDeliveries: 30_000,
    /** Jobs per addBulk, and addBulk calls in flight, when the backlog is enqueued. */
    enqueueChunk: 1_000,
    enqueueInFlight: 4,
    /** The reconciler is watched this long while the backlog sits (RECONCILE_INTERVAL is its default, 10 s). */
    idleMs: 40_000,
    /** The drain is measured over this window, from the moment the queue is resumed. */
    drainMs: 60_000,
    /** The first pass after a start checks every due delivery; it must end within this. */
    firstPassTimeoutMs: 180_000,
  },
  /**
   * Phase 8: retention on a long-lived log. 10,000,000 deliveries over 30 days (with their events
   * and attempts); publish and list load at a steady rate, in windows without pruning (their
   * spread is the noise) taking turns with windows of a worker pruning at RETENTION
   * `retentionDays`, which makes 90% of the rows old enough.
   */
  retention: {
    deliveries: 10_000_000,
    subscriptions: 100,
    deliveriesPerEvent: 10,
    spanDays: 30,
    retentionDays: 3,
    /** Open loop, each event to one subscription (the phase's own, at the receiver). */
    publishRatePerSecond: 100,
    /** One list request at a time, scheduled at this rate, the cases taking turns. */
    listRatePerSecond: 20,
    connections: 32,
    /** After each worker start, load that is not counted (the pruner begins its pass in it). */
    warmupMs: 10_000,
    windowMs: 45_000,
  },
} as const;

/** A static key the API accepts through API_KEYS (contract §3). */
export const BENCH_API_KEY = `bench_${randomBytes(24).toString("hex")}`;

const RUN_ID = randomBytes(4).toString("hex");

/** Unique per run, so our Redis keys never collide with anything else and are easy to delete. */
export const RUN_PREFIX = `bench-${RUN_ID}`;

export const ADMIN_DATABASE_URL =
  process.env.BENCH_ADMIN_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The benchmark's own databases, dropped at the end (and at the start, if a run was killed). */
export const DATABASES = { main: "webhooks_bench", list: "webhooks_bench_list" } as const;

/**
 * The big databases of phases 6 and 8, named per run: another benchmark may run on the same
 * server at the same time, and its start-of-run clean-up (DROP DATABASE ... WITH (FORCE) of
 * DATABASES) must not end a seed of several minutes. Each is dropped at the end of its phase;
 * one a killed run left behind is dropped by the next run's phase, once nobody is connected to it.
 */
export const SCALE_DATABASES = {
  backlog: `webhooks_bench_backlog_${RUN_ID}`,
  retention: `webhooks_bench_retention_${RUN_ID}`,
} as const;
