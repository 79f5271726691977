// Starts a worker process: checks configuration and services, applies migrations, takes jobs.
import { ConfigError, createLogger, loadConfig, postgresUnreachableMessage, redisUnreachableMessage } from "@webhooks/core";
import { applyMigrations, checkPostgres } from "@webhooks/db";
import { checkRedis } from "@webhooks/queue";
import { startWorker } from "./start-worker.ts";

let config;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(error.message);
  process.exit(1);
}
const logger = createLogger({ level: config.logLevel, name: "worker" });

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
// Both the API and the workers apply migrations; the advisory lock makes that safe.
await applyMigrations(config.databaseUrl, { info: (m) => logger.info(m), warn: (m) => logger.warn(m) });

const worker = await startWorker(config, logger);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "shutting down: finishing jobs in flight");
  await worker.close();
  logger.info("worker stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
