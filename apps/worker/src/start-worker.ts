import {
  type Config,
  type Logger,
  SecretBox,
  settlesWithin,
  startTracing,
  type Tracing,
  WEBHOOK_USER_AGENT,
} from "@webhooks/core";
import { createDatabase } from "@webhooks/db";
import {
  checkEvictionPolicy,
  connectRedis,
  DeliveryGate,
  DeliveryQueue,
  queueLayoutFor,
  waitUntilConnected,
} from "@webhooks/queue";
import { createAttemptBatches } from "./attempt-batches.ts";
import { createDeliveryWorker, shardConcurrency } from "./delivery-worker.ts";
import { HttpSender } from "./http-sender.ts";
import { createWorkerMetrics } from "./metrics.ts";
import { type OpsServer, startOpsServer } from "./ops-server.ts";
import { Pruner } from "./pruner.ts";
import { Reconciler } from "./reconciler.ts";
import type { Resolver } from "./safe-lookup.ts";
import { SecretKeys } from "./secret-keys.ts";
import { createWorkerState } from "./worker-state.ts";

const FORCED_CLOSE_MS = 2_000;
/** A delivery's lease outlives the attempt's timeout by this much, to cover the database writes. */
const LEASE_MARGIN_MS = 5_000;
/**
 * How long the process may keep a slot at the gate for its next attempts of the same
 * subscription (the gate's "Held slots"): long enough that a busy subscription's attempts
 * rarely call Redis, short enough that another process finding it full waits little.
 */
const GATE_HOLD_SLOTS_MS = 200;

export interface RunningWorker {
  /** The metrics server's port (0 when it is off). */
  metricsPort: number;
  reconciler: Reconciler;
  /** The OpenTelemetry SDK; undefined when tracing is off (docs/operations.md#tracing). */
  tracing: Tracing | undefined;
  /**
   * Stops taking jobs and waits for the ones in flight, at most `shutdownTimeoutMs`; jobs still
   * running then are abandoned to BullMQ's stall detection and picked up by another worker.
   */
  close(): Promise<void>;
}

/** Starts a worker process's parts: the BullMQ workers (one per queue shard), the reconciler, the pruner and /metrics. */
export async function startWorker(
  config: Config,
  logger: Logger,
  options: { resolve?: Resolver; metrics?: boolean } = {},
): Promise<RunningWorker> {
  // Claims and records of concurrent jobs are batched, so a few connections serve any concurrency.
  const database = createDatabase({
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    queryTimeoutMs: config.databaseQueryTimeoutMs,
  });
  // The reconciler and the pruner each hold a connection for a whole pass (their advisory locks
  // are the session's): a pool of their own, so that a long pass never takes one from the jobs.
  const passes = createDatabase({
    databaseUrl: config.databaseUrl,
    poolSize: 2,
    queryTimeoutMs: config.databaseQueryTimeoutMs,
  });
  const layout = queueLayoutFor(config);
  const workerRedis = connectRedis(config, "worker");
  const producerRedis = connectRedis(config, "producer");
  const gateRedis = connectRedis(config, "gate");
  const queue = new DeliveryQueue(producerRedis, layout, logger);
  const gate = new DeliveryGate(gateRedis, layout, {
    holdSlotsMs: GATE_HOLD_SLOTS_MS,
    wake: (wakes) =>
      queue
        .wake(wakes)
        .catch((error: unknown) =>
          logger.warn({ err: error, wakes: wakes.length }, "could not wake waiting deliveries"),
        ),
    logger,
  });
  const leaseMs = config.worker.deliveryTimeoutMs + LEASE_MARGIN_MS;
  const metrics = createWorkerMetrics(queue);
  const secretBox = new SecretBox(config.secretEncryptionKey);
  const sender = new HttpSender({
    timeoutMs: config.worker.deliveryTimeoutMs,
    policy: config.destinationPolicy,
    userAgent: WEBHOOK_USER_AGENT,
    secretBox,
    proxyUrl: config.worker.egressProxyUrl,
    ...(options.resolve ? { resolve: options.resolve } : {}),
    logger,
  });

  /** Lets go of the connections and pools, once nothing runs on them any more. */
  const release = async () => {
    await queue.close().catch(() => {});
    workerRedis.disconnect();
    producerRedis.disconnect();
    gateRedis.disconnect();
    await Promise.all([database.close(), passes.close()]);
  };

  // First of what may fail: a port already taken stops the start before any job is taken, and
  // leaves no connection open behind it.
  let opsServer: OpsServer | undefined;
  try {
    opsServer =
      options.metrics !== false
        ? await startOpsServer(metrics.registry, config.host, config.worker.metricsPort, logger)
        : undefined;
  } catch (error) {
    await sender.close().catch(() => {});
    await release();
    throw error;
  }
  const metricsPort = opsServer?.port ?? 0;

  await waitUntilConnected(producerRedis).catch((error: Error) =>
    logger.warn({ err: error }, "Redis is not ready yet"),
  );
  const evictionPolicy = await checkEvictionPolicy(producerRedis).catch(() => undefined);
  if (evictionPolicy)
    logger.warn({ evictionPolicy }, "Redis maxmemory-policy should be noeviction, or queued jobs may be evicted");

  const tracing = await startTracing(config.tracing, "webhooks-worker");
  const attemptDeps = {
    sql: database.sql,
    batches: createAttemptBatches(database.sql, leaseMs, config.isolation, config.databaseQueryTimeoutMs),
    gate,
    queue,
    sender,
    secretKeys: new SecretKeys(secretBox),
    metrics,
    logger,
    retryScheduleMs: config.worker.retryScheduleMs,
    isolation: config.isolation,
    leaseMs,
    state: createWorkerState(config.worker.concurrency),
    tracing,
    sendTraceparent: config.worker.sendTraceparent,
  };
  // One BullMQ worker per shard of the deliveries queue, sharing the process's concurrency.
  const shards = layout.shardPrefixes.length;
  const workers = layout.shardPrefixes.map((prefix, shard) =>
    createDeliveryWorker(attemptDeps, {
      connection: workerRedis,
      prefix,
      concurrency: shardConcurrency(config.worker.concurrency, shards, shard),
      lockMs: config.worker.jobLockMs,
    }),
  );
  const reconciler = new Reconciler(
    { sql: passes.sql, queue, gate, logger, metrics },
    config.worker.reconcileIntervalMs,
  );
  // RETENTION=off (and PAYLOAD_RETENTION unset or off) keeps everything: no pruner at all.
  const { maxAgeMs: retentionMs, payloadMaxAgeMs: payloadRetentionMs } = config.retention;
  const pruner =
    retentionMs === undefined && payloadRetentionMs === undefined
      ? undefined
      : new Pruner(
          { sql: passes.sql, logger, metrics },
          { retentionMs, payloadRetentionMs, intervalMs: config.retention.pruneIntervalMs },
        );

  for (const worker of workers) void worker.run();
  reconciler.start();
  pruner?.start();
  logger.info(
    {
      concurrency: config.worker.concurrency,
      shards,
      cluster: config.redisClusterNodes !== undefined,
      metricsPort,
      // Whether, not where: the URL may hold the proxy's password.
      egressProxy: config.worker.egressProxyUrl !== undefined,
      tracing: tracing !== undefined,
    },
    "worker started",
  );

  return {
    metricsPort,
    reconciler,
    tracing,
    async close() {
      // The pruner stops between two batches.
      await Promise.all([reconciler.stop(), pruner?.stop()]);
      // close() stops taking jobs at once and resolves when the jobs in flight are done.
      const drained = await settlesWithin(
        Promise.all(workers.map((worker) => worker.close())),
        config.worker.shutdownTimeoutMs,
      );
      if (!drained) {
        logger.warn(
          { timeoutMs: config.worker.shutdownTimeoutMs },
          "jobs still in flight at the shutdown deadline; leaving them to another worker",
        );
        // BullMQ also waits here for a Redis that may be gone; stop reconnecting so it cannot.
        workerRedis.disconnect();
        await settlesWithin(Promise.all(workers.map((worker) => worker.close(true))), FORCED_CLOSE_MS);
      }
      await opsServer?.close();
      // Closing the connection pool waits for requests in flight; after the deadline, do not.
      if (drained) await sender.close().catch(() => {});
      else void sender.close().catch(() => {});
      // Slots the gate keeps go back now, not when their lease expires (if Redis answers soon:
      // otherwise they expire with it, and shutting down must not wait).
      await settlesWithin(gate.close(), FORCED_CLOSE_MS);
      await release();
      // The last spans go out (the exporter gives up after its own timeout).
      await tracing?.shutdown().catch(() => {});
    },
  };
}
