import { postgresUnreachableMessage } from "@webhooks/core";
import pg from "pg";

/**
 * Undefined when PostgreSQL accepts a connection at `url`, else a one-line message saying what
 * failed and how to start it. A missing database counts as reachable: the migrations create it.
 */
export async function checkPostgres(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    if (code === "3D000") return undefined;
    return postgresUnreachableMessage(
      url,
      code && !message.includes(code) ? `${code} ${message}` : message || String(code),
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Whether an error means PostgreSQL could not be reached (refused, reset, timed out, shutting
 * down, out of connections) rather than that a statement failed: the API answers such a request
 * 503 with Retry-After, and the worker parks the job until PostgreSQL is back; neither is the
 * caller's fault. The error comes from node-postgres directly (hot statements) or wrapped by
 * Prisma and its pg adapter, so the error, its `cause` and Prisma's `meta.driverAdapterError`
 * are all examined.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  const seen = new Set<unknown>();
  const pending: unknown[] = [error];
  while (pending.length > 0 && seen.size < 10) {
    const current = pending.pop();
    if (current === null || typeof current !== "object" || seen.has(current)) continue;
    seen.add(current);
    const { code, kind, message, cause, meta } = current as {
      code?: unknown;
      kind?: unknown;
      message?: unknown;
      cause?: unknown;
      meta?: { driverAdapterError?: unknown };
    };
    if (
      typeof code === "string" &&
      (SOCKET_ERRORS.has(code) || PRISMA_CONNECTION_ERRORS.has(code) || isPostgresConnectionState(code))
    )
      return true;
    if (typeof kind === "string" && ADAPTER_CONNECTION_ERRORS.has(kind)) return true;
    if (typeof message === "string" && CONNECTION_MESSAGES.test(message)) return true;
    pending.push(cause, meta?.driverAdapterError);
  }
  return false;
}

const SOCKET_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "EAI_AGAIN",
  "ECONNABORTED",
]);

/** P1001 cannot reach, P1002 timed out, P1017 server closed the connection, P2024 pool timeout. */
const PRISMA_CONNECTION_ERRORS = new Set(["P1001", "P1002", "P1017", "P2024"]);

/** @prisma/adapter-pg's names for the socket errors above and for SQLSTATE 53300. */
const ADAPTER_CONNECTION_ERRORS = new Set([
  "DatabaseNotReachable",
  "ConnectionClosed",
  "SocketTimeout",
  "TooManyConnections",
]);

/** SQLSTATE class 08 (connection exception), 57P01-57P03 (shutting down, cannot connect now), 53300 (too many connections). */
function isPostgresConnectionState(code: string): boolean {
  return /^08[0-9A-Z]{3}$/.test(code) || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300";
}

/** node-postgres reports a dropped connection, a pool timeout and a statement unanswered for DATABASE_QUERY_TIMEOUT only in words. */
const CONNECTION_MESSAGES =
  /^Connection terminated|timeout exceeded when trying to connect|Can't reach database server|Client has encountered a connection error|Query read timeout/i;
