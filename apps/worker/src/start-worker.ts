import { createServer, type Server } from "node:http";
import { SecretBox, type Config, type Logger } from "@webhooks/core";
import { createPrismaClient } from "@webhooks/db";
import { checkEvictionPolicy, createRedisConnection, DeliveryQueue, waitUntilConnected } from "@webhooks/queue";
import { createDeliveryWorker } from "./delivery-worker.ts";
import { HttpSender } from "./http-sender.ts";
import { createWorkerMetrics } from "./metrics.ts";
import { Reconciler } from "./reconciler.ts";
import type { Resolver } from "./safe-lookup.ts";
import { SecretKeys } from "./secret-keys.ts";

export interface RunningWorker {
  /** The metrics server's port (0 when it is off). */
  metricsPort: number;
  reconciler: Reconciler;
  /**
   * Stops taking jobs and waits for the ones in flight, at most `shutdownTimeoutMs`; jobs still
   * running then are abandoned to BullMQ's stall detection and picked up by another worker.
   */
  close(): Promise<void>;
}

/** Starts a worker process's parts: the BullMQ worker, the reconciler and /metrics. */
export async function startWorker(config: Config, logger: Logger, options: { resolve?: Resolver; metrics?: boolean } = {}): Promise<RunningWorker> {
  const db = createPrismaClient({ databaseUrl: config.databaseUrl, poolSize: Math.max(config.databasePoolSize, Math.min(config.worker.concurrency, 50)) });
  const workerRedis = createRedisConnection(config.redisUrl, "worker");
  const producerRedis = createRedisConnection(config.redisUrl, "producer");
  const queue = new DeliveryQueue(producerRedis, config.queuePrefix, logger);
  const metrics = createWorkerMetrics(queue);
  const sender = new HttpSender({
    timeoutMs: config.worker.deliveryTimeoutMs,
    policy: config.destinationPolicy,
    userAgent: "webhook-delivery-service/1.0",
    ...(options.resolve ? { resolve: options.resolve } : {}),
  });

  await waitUntilConnected(producerRedis).catch((error: Error) => logger.warn({ err: error }, "Redis is not ready yet"));
  const evictionPolicy = await checkEvictionPolicy(producerRedis).catch(() => undefined);
  if (evictionPolicy) logger.warn({ evictionPolicy }, "Redis maxmemory-policy should be noeviction, or queued jobs may be evicted");

  const worker = createDeliveryWorker(
    {
      db,
      sender,
      secretKeys: new SecretKeys(new SecretBox(config.secretEncryptionKey)),
      metrics,
      logger,
      retryScheduleMs: config.worker.retryScheduleMs,
      deliveryTimeoutMs: config.worker.deliveryTimeoutMs,
    },
    { connection: workerRedis, prefix: config.queuePrefix, concurrency: config.worker.concurrency, lockMs: config.worker.jobLockMs },
  );
  const reconciler = new Reconciler({ db, queue, logger, metrics }, config.worker.reconcileIntervalMs);

  let server: Server | undefined;
  let metricsPort = 0;
  if (options.metrics !== false) {
    server = createServer((req, res) => {
      if (req.url === "/metrics") {
        metrics.registry
          .metrics()
          .then((text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text))
          .catch(() => res.writeHead(500).end());
      } else if (req.url === "/healthz") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
      } else {
        res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"type":"invalid_request_error","code":"resource_missing","message":"Not found"}}');
      }
    });
    await new Promise<void>((resolve) => server!.listen(config.worker.metricsPort, config.host, resolve));
    const address = server.address();
    metricsPort = typeof address === "object" && address ? address.port : 0;
  }

  void worker.run();
  reconciler.start();
  logger.info({ concurrency: config.worker.concurrency, metricsPort }, "worker started");

  return {
    metricsPort,
    reconciler,
    async close() {
      await reconciler.stop();
      let timer: NodeJS.Timeout | undefined;
      const drained = await Promise.race([
        worker.close().then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), config.worker.shutdownTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (!drained) {
        logger.warn({ timeoutMs: config.worker.shutdownTimeoutMs }, "jobs still in flight at the shutdown deadline; leaving them to another worker");
        await worker.close(true);
      }
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
      await sender.close().catch(() => {});
      await queue.close().catch(() => {});
      workerRedis.disconnect();
      producerRedis.disconnect();
      await db.$disconnect();
    },
  };
}
