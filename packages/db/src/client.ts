import { PrismaPg } from "@prisma/adapter-pg";
import { DEFAULT_DATABASE_QUERY_TIMEOUT_MS } from "@webhooks/core";
import pg from "pg";
import { Prisma, PrismaClient } from "./generated/prisma/client.ts";
import { SqlClient, statementName } from "./sql.ts";

export { Prisma, PrismaClient };

/** A client or an open transaction: verbs accept either, so they compose. */
export type PrismaClientOrTransaction = PrismaClient | Prisma.TransactionClient;

/** Runs `work` in a transaction: the caller's, when `db` is one already, or a new one. */
export function inTransaction<T>(
  db: PrismaClientOrTransaction,
  work: (tx: Prisma.TransactionClient) => Promise<T>,
): Promise<T> {
  return "$transaction" in db ? db.$transaction(work) : work(db);
}

export interface DatabaseOptions {
  databaseUrl: string;
  poolSize: number;
  /** A statement unanswered this long fails, and its connection is dropped (DATABASE_QUERY_TIMEOUT). */
  queryTimeoutMs?: number;
}

/** One connection pool, used by Prisma and by the hot statements of `SqlClient`. */
export interface Database {
  prisma: PrismaClient;
  sql: SqlClient;
  close(): Promise<void>;
}

/**
 * Prisma 7 runs without a native query engine: queries go through node-postgres via the pg
 * adapter, so nothing needs downloading at install or run time.
 */
export function createDatabase(options: DatabaseOptions): Database {
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: options.poolSize,
    // Fail a request quickly instead of queueing it forever when PostgreSQL is unreachable.
    connectionTimeoutMillis: 5_000,
    // A connection whose network path died without a reset answers nothing, and the kernel takes
    // a quarter of an hour to give up on it: its statement fails after this instead, and the
    // connection is dropped (pool.query drops a client whose query failed; see SqlClient for the
    // connections it checks out), so the next statement gets a new one.
    query_timeout: options.queryTimeoutMs ?? DEFAULT_DATABASE_QUERY_TIMEOUT_MS,
    // And an idle one is found dead by TCP keep-alive probes, before a statement meets it.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // An idle connection that breaks is dropped by the pool; the next query reports the problem.
  pool.on("error", () => {});
  const prisma = new PrismaClient({
    adapter: new PrismaPg(pool, { statementNameGenerator: (query) => statementName(query.sql) }),
  });
  return {
    prisma,
    sql: new SqlClient(pool),
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}
