import { type Config, ConfigError, loadConfig } from "./config.ts";

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
