// Starts the API: checks configuration and services, applies migrations, serves HTTP.
import { serve } from "@hono/node-server";
import {
  createLogger,
  loadConfigOrExit,
  postgresUnreachableMessage,
  redisUnreachableMessage,
  SecretBox,
} from "@webhooks/core";
import { applyMigrations, checkPostgres, createDatabase } from "@webhooks/db";
import { checkEvictionPolicy, checkRedis, createRedisConnection, DeliveryQueue, waitUntilConnected } from "@webhooks/queue";
import { createApp } from "./app.ts";
import { ApiKeyAuthenticator } from "./http/auth.ts";

const config = loadConfigOrExit();
const logger = createLogger({ level: config.logLevel, name: "api" });

const postgresProblem = await checkPostgres(config.databaseUrl);
if (postgresProblem) {
  console.error(postgresUnreachableMessage(config.databaseUrl, postgresProblem));
  process.exit(1);
}
const redisProblem = await checkRedis(config.redisUrl);
if (redisProblem) {
  console.error(redisUnreachableMessage(config.redisUrl, redisProblem));
  process.exit(1);
}

await applyMigrations(config.databaseUrl, {
  info: (message) => logger.info(message),
  warn: (message) => logger.warn(message),
});

const database = createDatabase({ databaseUrl: config.databaseUrl, poolSize: config.databasePoolSize });
const db = database.prisma;
const redis = createRedisConnection(config.redisUrl, "producer");
const queue = new DeliveryQueue(redis, config.queuePrefix, logger);
// Requests fail fast while Redis is down, so wait for the connection before serving any.
await waitUntilConnected(redis).catch((error: Error) => logger.warn({ err: error }, "Redis is not ready yet"));
const evictionPolicy = await checkEvictionPolicy(redis).catch(() => undefined);
if (evictionPolicy) logger.warn({ evictionPolicy }, "Redis maxmemory-policy should be noeviction, or queued jobs may be evicted");
if (config.apiKeys.length === 0) logger.warn("API_KEYS is empty: only keys created with `npm run keys -- create` are accepted");

const app = createApp({
  config,
  db,
  sql: database.sql,
  redis,
  queue,
  logger,
  secretBox: new SecretBox(config.secretEncryptionKey),
  authenticator: new ApiKeyAuthenticator(db, config.apiKeys),
});

const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
  logger.info({ port: info.port, host: config.host, docs: `http://localhost:${info.port}/docs` }, "API listening");
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "shutting down");
  // Stop accepting connections, let requests in flight finish, then close our clients.
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await queue.close().catch(() => {});
  redis.disconnect();
  await database.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
