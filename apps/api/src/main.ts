// Starts the API: checks configuration and services, applies migrations, serves HTTP.
import type { AddressInfo } from "node:net";
import {
  createLogger,
  exitOnStartupFailure,
  listen,
  loadConfigOrExit,
  logFormatFor,
  StartupError,
} from "@webhooks/core";
import { applyMigrations, checkPostgres } from "@webhooks/db";
import { checkEvictionPolicy, checkRedis } from "@webhooks/queue";
import { createApp } from "./app.ts";
import { connectApiDeps } from "./deps.ts";
import { createApiServer } from "./http/server.ts";
import { ADMIN_BASE_PATH } from "./ops/admin.ts";

const config = loadConfigOrExit();
const logger = createLogger({ level: config.logLevel, name: "api", format: logFormatFor(config) });

/** Everything up to listening. A failure on the way is one line and exit code 1, as a bad setting is. */
async function start() {
  const unreachable = (await checkPostgres(config.databaseUrl)) ?? (await checkRedis(config));
  if (unreachable) throw new StartupError(unreachable);

  await applyMigrations(config.databaseUrl, {
    info: (message) => logger.info(message),
    warn: (message) => logger.warn(message),
  });

  const deps = await connectApiDeps(config, logger);
  const evictionPolicy = await checkEvictionPolicy(deps.redis).catch(() => undefined);
  if (evictionPolicy)
    logger.warn({ evictionPolicy }, "Redis maxmemory-policy should be noeviction, or queued jobs may be evicted");
  if (config.apiKeys.length === 0)
    logger.warn("API_KEYS is empty: only keys created with `npm run keys -- create` are accepted");
  const app = createApp(deps);

  const server = createApiServer(app.fetch, logger);
  await listen(server, config.port, config.host, "PORT");
  return { server, deps };
}

const { server, deps } = await start().catch((error: unknown) => exitOnStartupFailure("The API", error, logger));
const port = (server.address() as AddressInfo).port;
const base = `http://localhost:${port}`;
const admin = config.admin ? `${base}${ADMIN_BASE_PATH}` : "off (set ADMIN_USERNAME and ADMIN_PASSWORD)";
logger.info(
  {
    port,
    host: config.host,
    docs: `${base}/docs`,
    metrics: `${base}/metrics`,
    bullBoard: admin,
    tracing: deps.tracing !== undefined,
  },
  "API listening",
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "shutting down");
  // Stop accepting connections, let requests in flight finish, then close our clients.
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await deps.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
