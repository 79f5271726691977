// Starts a worker process: checks configuration and services, applies migrations, takes jobs.
import { createLogger, exitOnStartupFailure, loadConfigOrExit, logFormatFor, StartupError } from "@webhooks/core";
import { applyMigrations, checkPostgres } from "@webhooks/db";
import { checkRedis } from "@webhooks/queue";
import { startWorker } from "./start-worker.ts";

const config = loadConfigOrExit();
const logger = createLogger({ level: config.logLevel, name: "worker", format: logFormatFor(config) });

/** Everything up to taking jobs. A failure on the way is one line and exit code 1, as a bad setting is. */
async function start() {
  const unreachable = (await checkPostgres(config.databaseUrl)) ?? (await checkRedis(config));
  if (unreachable) throw new StartupError(unreachable);
  // Both the API and the workers apply migrations; the advisory lock makes that safe.
  await applyMigrations(config.databaseUrl, { info: (m) => logger.info(m), warn: (m) => logger.warn(m) });
  return startWorker(config, logger);
}

const worker = await start().catch((error: unknown) => exitOnStartupFailure("The worker", error, logger));

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "shutting down: finishing jobs in flight");
  // Whatever happens below, this process exits: an orchestrator waiting on it must not hang.
  setTimeout(() => {
    logger.warn("shutdown did not finish in time; exiting anyway");
    process.exit(0);
  }, config.worker.shutdownTimeoutMs + 10_000).unref();
  await worker.close();
  logger.info("worker stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
