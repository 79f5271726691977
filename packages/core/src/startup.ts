import type { Server } from "node:net";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import type { Logger } from "./logger.ts";

/**
 * The one-line messages printed when a dependency is missing at start-up, so a newcomer knows
 * what to do rather than reading a stack trace.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable URL)";
  }
}

/**
 * The cause of a failed connection, in one line. Node's network errors carry a code (ECONNREFUSED,
 * ENOTFOUND, ETIMEDOUT) that their message may lack, and a connection tried on several addresses
 * (`localhost`: ::1 and 127.0.0.1) fails with an AggregateError whose own message is empty.
 */
export function connectionFailureReason(error: unknown): string {
  if (error instanceof AggregateError && !error.message && error.errors.length > 0) {
    return [...new Set(error.errors.map(connectionFailureReason))].join("; ");
  }
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  if (typeof code !== "string" || error.message.includes(code)) return error.message || "unknown error";
  return error.message ? `${code} ${error.message}` : code;
}

export function postgresUnreachableMessage(url: string, reason: string): string {
  return (
    `Cannot reach PostgreSQL at ${redactUrl(url)} (${reason}). Start it ` +
    "(e.g. `pg_ctlcluster 15 main start`, `brew services start postgresql` or `docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:15`) " +
    "or point DATABASE_URL at a running server."
  );
}

export function redisUnreachableMessage(url: string, reason: string): string {
  return (
    `Cannot reach Redis at ${redactUrl(url)} (${reason}). Start it ` +
    "(e.g. `redis-server --daemonize yes`, `brew services start redis` or `docker run -d -p 6379:6379 redis:7`) " +
    "or point REDIS_URL at a running server."
  );
}

/** Reads the configuration, or prints the one-line reason it is invalid and exits with 1. */
export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(error.message);
    process.exit(1);
  }
}

/** A start-up failure whose message is already the one line to print (it names what to change). */
export class StartupError extends Error {
  override name = "StartupError";
}

/**
 * Listens on host:port, or rejects with a StartupError naming the variable that sets the port
 * (`PORT`, `WORKER_METRICS_PORT`) and, when the address is at fault, `HOST`.
 */
export async function listen(server: Server, port: number, host: string, variable: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error) => reject(new StartupError(listenFailureMessage(variable, host, port, error)));
    server.once("error", failed);
    server.listen(port, host, () => {
      server.off("error", failed);
      resolve();
    });
  });
}

export function listenFailureMessage(variable: string, host: string, port: number, error: unknown): string {
  const code = (error as { code?: unknown }).code;
  const where = `${host}:${port}`;
  switch (code) {
    case "EADDRINUSE":
      return `Cannot listen on ${where}: port ${port} is already in use (EADDRINUSE). Stop what holds it or set ${variable} to a free port.`;
    case "EACCES":
      return `Cannot listen on ${where}: not permitted (EACCES; ports below 1024 need privileges). Set ${variable} to a port from 1024 up.`;
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `Cannot listen on ${where}: ${host} is not an address of this machine (${code}). Set HOST to one of its addresses, or 0.0.0.0 for all.`;
    default:
      return `Cannot listen on ${where} (${connectionFailureReason(error)}). Check ${variable} and HOST.`;
  }
}

/**
 * Prints the one line that says why `program` ("The API", "The worker") could not start, and
 * exits with 1. A StartupError is printed as it is; anything else after the program's name. The
 * whole error, stack included, goes to the log at debug level (LOG_LEVEL=debug).
 */
export function exitOnStartupFailure(program: string, error: unknown, logger: Logger): never {
  logger.debug({ err: error }, "start-up failed");
  console.error(
    error instanceof StartupError ? error.message : `${program} could not start: ${connectionFailureReason(error)}`,
  );
  process.exit(1);
}
