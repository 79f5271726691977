/**
 * Whether an error means PostgreSQL could not be reached (refused, reset, timed out, shutting
 * down, out of connections) rather than that a statement failed. Such a request is answered 503
 * with Retry-After: the client did nothing wrong and may try again. The error comes from
 * node-postgres directly (hot statements) or wrapped by Prisma and its pg adapter, so the
 * error, its `cause` and Prisma's `meta.driverAdapterError` are all examined.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  const seen = new Set<unknown>();
  const pending: unknown[] = [error];
  while (pending.length > 0 && seen.size < 10) {
    const current = pending.pop();
    if (current === null || typeof current !== "object" || seen.has(current)) continue;
    seen.add(current);
    const { code, kind, message, cause, meta } = current as { code?: unknown; kind?: unknown; message?: unknown; cause?: unknown; meta?: { driverAdapterError?: unknown } };
    if (typeof code === "string" && (SOCKET_ERRORS.has(code) || PRISMA_CONNECTION_ERRORS.has(code) || isPostgresConnectionState(code))) return true;
    if (typeof kind === "string" && ADAPTER_CONNECTION_ERRORS.has(kind)) return true;
    if (typeof message === "string" && CONNECTION_MESSAGES.test(message)) return true;
    pending.push(cause, meta?.driverAdapterError);
  }
  return false;
}

/** A seconds value for Retry-After while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

const SOCKET_ERRORS = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EPIPE", "EAI_AGAIN", "ECONNABORTED"]);

/** P1001 cannot reach, P1002 timed out, P1017 server closed the connection, P2024 pool timeout. */
const PRISMA_CONNECTION_ERRORS = new Set(["P1001", "P1002", "P1017", "P2024"]);

/** @prisma/adapter-pg's names for the socket errors above and for SQLSTATE 53300. */
const ADAPTER_CONNECTION_ERRORS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);

/** SQLSTATE class 08 (connection exception), 57P01-57P03 (shutting down, cannot connect now), 53300 (too many connections). */
function isPostgresConnectionState(code: string): boolean {
  return /^08[0-9A-Z]{3}$/.test(code) || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300";
}

/** node-postgres reports a dropped connection and a pool timeout only in words. */
const CONNECTION_MESSAGES = /^Connection terminated|timeout exceeded when trying to connect|Can't reach database server|Client has encountered a connection error/i;
