import { PrismaPg } from "@prisma/adapter-pg";
import { Prisma, PrismaClient } from "./generated/prisma/client.ts";

export { Prisma, PrismaClient };

/** A client or an open transaction: verbs accept either, so they compose (STYLE 4). */
export type PrismaClientOrTransaction = PrismaClient | Prisma.TransactionClient;

export interface DatabaseOptions {
  databaseUrl: string;
  poolSize: number;
}

/**
 * Prisma 7 runs without a native query engine: queries go through node-postgres via the pg
 * adapter, so nothing needs downloading at install or run time.
 */
export function createPrismaClient(options: DatabaseOptions): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: options.databaseUrl,
    max: options.poolSize,
    // Fail a request quickly instead of queueing it forever when PostgreSQL is unreachable.
    connectionTimeoutMillis: 5_000,
  });
  return new PrismaClient({ adapter });
}

/**
 * Runs `work` in a transaction, or inside the caller's transaction when given one, so that a verb
 * can be used on its own or as part of a larger unit.
 */
export async function inTransaction<T>(
  db: PrismaClientOrTransaction,
  work: (tx: Prisma.TransactionClient) => Promise<T>,
  options?: { timeoutMs?: number },
): Promise<T> {
  if (!("$transaction" in db)) return work(db);
  return db.$transaction(work, { timeout: options?.timeoutMs ?? 10_000, maxWait: 10_000 });
}
