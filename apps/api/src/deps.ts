import { type Config, type Logger, SecretBox, startTracing, withDeadline } from "@webhooks/core";
import { createDatabase } from "@webhooks/db";
import { connectRedis, DeliveryGate, DeliveryQueue, queueLayoutFor, waitUntilConnected } from "@webhooks/queue";
import { EventTypeCatalogCache } from "./events/catalog-cache.ts";
import { createEventPublisher } from "./events/publisher.ts";
import { CredentialAuthenticator } from "./http/auth.ts";
import type { ApiDeps } from "./http/types.ts";

/** How long closing waits for BullMQ to let go of Redis. */
const CLOSE_DEADLINE_MS = 2_000;

/**
 * Connects everything the API needs (PostgreSQL pool, Redis, the deliveries queue) from the
 * configuration. Used by main.ts and by the tests, so both run the same wiring.
 */
export async function connectApiDeps(
  config: Config,
  logger: Logger,
  options: { redisReadyTimeoutMs?: number; clock?: () => number } = {},
): Promise<ApiDeps & { close(): Promise<void> }> {
  const database = createDatabase({
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    queryTimeoutMs: config.databaseQueryTimeoutMs,
  });
  const redis = connectRedis(config, "producer");
  const layout = queueLayoutFor(config);
  const queue = new DeliveryQueue(redis, layout, logger);
  // Requests fail fast while Redis is down, so wait for the connection before serving any.
  await waitUntilConnected(redis, options.redisReadyTimeoutMs).catch((error: Error) =>
    logger.warn({ err: error }, "Redis is not ready yet"),
  );
  const tracing = await startTracing(config.tracing, "webhooks-api");
  const catalog = new EventTypeCatalogCache({ db: database.prisma, strict: config.eventTypesStrict });
  const publisher = createEventPublisher({
    sql: database.sql,
    queue,
    logger,
    catalog,
    batchWindowMs: config.publishBatchWindowMs,
  });
  return {
    config,
    prisma: database.prisma,
    pool: database.sql,
    redis,
    queue,
    gate: new DeliveryGate(redis, layout),
    publisher,
    catalog,
    logger,
    secretBox: new SecretBox(config.secretEncryptionKey),
    authenticator: new CredentialAuthenticator(database.prisma, config.apiKeys, options.clock),
    tracing,
    async close() {
      // A big fan-out enqueues its jobs after its 202: let that finish (the reconciler would
      // otherwise pick the rest up, but later).
      await publisher.idle().catch(() => {});
      // BullMQ's close waits for Redis, which may be down or stalled: shutting down must not hang on it.
      await withDeadline(queue.close(), CLOSE_DEADLINE_MS, "Redis").catch(() => {});
      redis.disconnect();
      await database.close();
      // The last spans go out (the exporter gives up after its own timeout).
      await tracing?.shutdown().catch(() => {});
    },
  };
}
