import type { SqlClient } from "./sql.ts";

/**
 * The reconciler's reads of `deliveries` (which are due, and the database's clock) and its lock.
 * It writes nothing: it enqueues what it finds. The writers are listed in delivery-leases.ts.
 */

export interface DueCursor {
  nextAttemptAt: Date;
  id: string;
}

/** Due, as both statements below mean it ($1: the grace in milliseconds). */
const IS_DUE = `next_attempt_at <= now() - $1::int * interval '1 millisecond'
       AND (leased_until IS NULL OR leased_until < now())`;

/**
 * Deliveries that should be in the queue: queued ones, and failed ones whose retry time has
 * passed (by `graceMs`, so a job that is about to fire is left alone), that no worker holds.
 * Paged by (next_attempt_at, id), each page its own short statement; `after` starts past a
 * cursor, and `dueSince` skips those that came due before a time (the reconciler's watermark).
 */
export async function findDueDeliveries(
  ctx: { sql: SqlClient },
  input: { graceMs: number; limit: number; after?: DueCursor | undefined; dueSince?: Date | undefined },
): Promise<DueCursor[]> {
  const after = input.after;
  // The row comparison walks the (next_attempt_at, id) index from the cursor.
  return ctx.sql.query<DueCursor>(
    `SELECT id, next_attempt_at AS "nextAttemptAt" FROM deliveries
     WHERE ${IS_DUE}
       AND ($5::timestamptz IS NULL OR next_attempt_at >= $5::timestamptz)
       AND ($2::timestamptz IS NULL OR (next_attempt_at, id) > ($2::timestamptz, $3::text))
     ORDER BY next_attempt_at, id LIMIT $4`,
    [
      input.graceMs,
      after?.nextAttemptAt.toISOString() ?? null,
      after?.id ?? "",
      input.limit,
      input.dueSince?.toISOString() ?? null,
    ],
  );
}

/**
 * Those of `ids` that are still due (as findDueDeliveries means it), read now. The reconciler
 * asks Redis about due deliveries after reading them: one delivered meanwhile has lost its job
 * (a finished job leaves Redis) and is not missing one.
 */
export async function stillDue(ctx: { sql: SqlClient }, input: { ids: string[]; graceMs: number }): Promise<string[]> {
  if (input.ids.length === 0) return [];
  const rows = await ctx.sql.query<{ id: string }>(
    `SELECT id FROM deliveries WHERE id = ANY($2::text[]) AND ${IS_DUE}`,
    [input.graceMs, input.ids],
  );
  const due = new Set(rows.map((row) => row.id));
  return input.ids.filter((id) => due.has(id));
}

/** The database's clock, which next_attempt_at is measured on. */
export async function databaseNow(ctx: { sql: SqlClient }): Promise<Date> {
  const [row] = await ctx.sql.query<{ now: Date }>("SELECT now() AS now", []);
  return row!.now;
}

/** Every worker runs a reconciler; this lock lets one of them scan at a time. 'whrecon' in ASCII. */
const RECONCILER_LOCK_KEY = 0x77687265636f6en.toString();

/**
 * Runs `work` if this process can take the reconciler's lock, holding it on one connection for
 * the whole pass (a session lock, not a transaction: the pass makes Redis calls between its short
 * statements, and must not hold a snapshot open meanwhile). Returns undefined when another
 * process holds it.
 */
export async function withReconcilerLock<T>(
  ctx: { sql: SqlClient },
  work: (sql: SqlClient) => Promise<T>,
): Promise<T | undefined> {
  return ctx.sql.withConnection(async (sql) => {
    const [lock] = await sql.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS locked", [
      RECONCILER_LOCK_KEY,
    ]);
    if (!lock?.locked) return undefined;
    try {
      return await work(sql);
    } finally {
      await sql.query("SELECT pg_advisory_unlock($1::bigint)", [RECONCILER_LOCK_KEY]);
    }
  });
}
