import { createHash } from "node:crypto";
import type pg from "pg";
import { isDatabaseUnreachable } from "./reachability.ts";

/**
 * Column naming in raw SQL (here and in Prisma's $queryRaw), one rule: every column a query
 * returns is aliased to the camelCase name of the TypeScript field it fills
 * (`created_at AS "createdAt"`, double-quoted so PostgreSQL keeps the case), and the row type
 * says the same names. Tables and columns stay snake_case in SQL; snake_case never reaches
 * TypeScript. A row that is returned as it is needs no mapping; one that is reshaped (nested
 * objects, a Map) is mapped field by field from camelCase names.
 */

/**
 * The delivery path's few hot statements (publishing, claiming, recording) and the three lists
 * (paging.ts) run on node-postgres directly, through the same pool as Prisma: a query through
 * Prisma's $queryRaw costs the client more than twice the CPU of node-postgres, and these
 * statements run several times per delivery or are the API's most frequent reads. Everything else
 * goes through Prisma.
 */
export class SqlClient {
  constructor(private readonly pool: pg.Pool | pg.PoolClient) {}

  /**
   * `timeoutMs`: unanswered this long, the statement fails as one unanswered for
   * DATABASE_QUERY_TIMEOUT does, and its connection is dropped (for a caller with less time left).
   */
  async query<Row extends object>(
    text: string,
    values: unknown[],
    options: { timeoutMs?: number } = {},
  ): Promise<Row[]> {
    const config: pg.QueryConfig & { query_timeout?: number } = { name: statementName(text), text, values };
    // node-postgres takes a statement's own timeout over the pool's; 0 would mean the pool's.
    if (options.timeoutMs !== undefined) config.query_timeout = Math.max(1, Math.round(options.timeoutMs));
    const result = await this.pool.query<Row>(config);
    return result.rows;
  }

  /**
   * Runs `work` on one connection of its own, outside any transaction: for session-level state
   * such as an advisory lock held across several short statements.
   */
  async withConnection<T>(work: (sql: SqlClient) => Promise<T>): Promise<T> {
    if (!("totalCount" in this.pool)) return work(this);
    return checkedOut(this.pool, (client) => work(new SqlClient(client)));
  }

  /** Runs `work` in one transaction on one connection (or in the caller's, when already in one). */
  async transaction<T>(work: (sql: SqlClient) => Promise<T>): Promise<T> {
    if (!("connect" in this.pool) || !("totalCount" in this.pool)) return work(this);
    return checkedOut(this.pool, async (client) => {
      try {
        await client.query("BEGIN");
        const result = await work(new SqlClient(client));
        await client.query("COMMIT");
        return result;
      } catch (error) {
        // A connection that failed us is dropped (see checkedOut), which ends its transaction; a
        // ROLLBACK would only wait behind the statement it did not answer.
        if (!isDatabaseUnreachable(error)) await client.query("ROLLBACK").catch(() => {});
        throw error;
      }
    });
  }
}

/**
 * Runs `work` on a connection taken from the pool. While a client is checked out the pool no
 * longer listens for its errors, and a backend that goes away meanwhile (a PostgreSQL restart, a
 * failover, an administrator's pg_terminate_backend) makes the client emit an 'error' that nobody
 * handles, which crashes the process: seen with the reconciler's and the pruner's passes, which
 * hold a connection for a whole pass. Listening turns that into failed queries, and a client that
 * broke is destroyed instead of going back to the pool. So is one whose statement went unanswered
 * (DATABASE_QUERY_TIMEOUT: its network path may be dead, and the statement may still be running),
 * as pool.query does with any client whose query failed.
 */
async function checkedOut<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => (broken = error);
  client.on("error", onError);
  try {
    return await work(client);
  } catch (error) {
    if (isDatabaseUnreachable(error)) broken ??= error as Error;
    throw error;
  } finally {
    client.off("error", onError);
    client.release(broken);
  }
}

/**
 * Named prepared statements: PostgreSQL parses and plans a named statement once per connection
 * instead of on every execution, which was a large share of its CPU on the delivery path. The name
 * is a hash of the SQL text, so the same text always reuses its statement. Prisma's queries get
 * names the same way.
 */
const statementNames = new Map<string, string>();
export function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `p${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    // The set of distinct statements is small and fixed by the code; this only guards against surprises.
    if (statementNames.size > 10_000) statementNames.clear();
    statementNames.set(text, name);
  }
  return name;
}
