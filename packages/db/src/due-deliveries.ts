import type { SqlClient } from "./sql.ts";

/**
 * The reconciler's reads of `deliveries` (which are due, the heads of the ordered lines, and the
 * database's clock) and its lock, and what says whose turn it is in a line. It writes nothing: it
 * enqueues what it finds. The writers are listed in delivery-leases.ts.
 */

export interface DueCursor {
  nextAttemptAt: Date;
  id: string;
}

/**
 * The lines of ordered delivery (docs/api.md#ordered-delivery): a subscription's ordered
 * deliveries not yet finished, in the order of their events' publication (created_at, then the
 * event's id), along the partial index deliveries_line_idx. The head of a line is its first entry.
 * `NEXT_IN_LINE(subscription)` selects it; a subquery or a lateral join, one probe of the index.
 */
const NEXT_IN_LINE = (subscription: string, columns = "id") =>
  `SELECT ${columns} FROM deliveries l
   WHERE l.subscription_id = ${subscription} AND l.ordered AND l.next_attempt_at IS NOT NULL
   ORDER BY l.created_at, l.event_id LIMIT 1`;

/**
 * Whether the delivery `d` (an alias) may be attempted as far as its order goes: it is not
 * ordered, or it is the head of its line, every delivery before it being delivered or failed for
 * good. The claim requires it, in the same statement that takes the lease, so the order holds
 * whatever the queue does: PostgreSQL alone decides it (docs/architecture.md#ordered-delivery).
 */
export const IN_TURN = (d: string) =>
  `(NOT ${d}.ordered OR ${d}.id = (${NEXT_IN_LINE(`${d}.subscription_id`, "l.id")}))`;

/** Due, as the statements below mean it ($1: the grace in milliseconds). */
const IS_DUE = `d.next_attempt_at <= now() - $1::int * interval '1 millisecond'
       AND (d.leased_until IS NULL OR d.leased_until < now())`;

export interface DueDelivery extends DueCursor {
  /**
   * Ordered, and behind others in its line: it has no job until its turn comes, so none is
   * missing (the line's head is checked by `lineHeads`).
   */
  inLine: boolean;
}

/**
 * Deliveries that should be in the queue: queued ones, and failed ones whose retry time has
 * passed (by `graceMs`, so a job that is about to fire is left alone), that no worker holds.
 * Paged by (next_attempt_at, id), each page its own short statement; `after` starts past a
 * cursor, and `dueSince` skips those that came due before a time (the reconciler's watermark).
 * Those waiting in an ordered line are in the page, marked, so that a long line cannot make a
 * page walk past it.
 */
export async function findDueDeliveries(
  ctx: { sql: SqlClient },
  input: { graceMs: number; limit: number; after?: DueCursor | undefined; dueSince?: Date | undefined },
): Promise<DueDelivery[]> {
  const after = input.after;
  // The row comparison walks the (next_attempt_at, id) index from the cursor.
  return ctx.sql.query<DueDelivery>(
    `SELECT d.id, d.next_attempt_at AS "nextAttemptAt", NOT ${IN_TURN("d")} AS "inLine" FROM deliveries d
     WHERE ${IS_DUE}
       AND ($5::timestamptz IS NULL OR d.next_attempt_at >= $5::timestamptz)
       AND ($2::timestamptz IS NULL OR (d.next_attempt_at, d.id) > ($2::timestamptz, $3::text))
     ORDER BY d.next_attempt_at, d.id LIMIT $4`,
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
 * Those of `ids` that are still due (as findDueDeliveries means it) and not waiting in a line,
 * read now. The reconciler asks Redis about due deliveries after reading them: one delivered
 * meanwhile has lost its job (a finished job leaves Redis) and is not missing one.
 */
export async function stillDue(ctx: { sql: SqlClient }, input: { ids: string[]; graceMs: number }): Promise<string[]> {
  if (input.ids.length === 0) return [];
  const rows = await ctx.sql.query<{ id: string }>(
    `SELECT d.id FROM deliveries d WHERE d.id = ANY($2::text[]) AND ${IS_DUE} AND ${IN_TURN("d")}`,
    [input.graceMs, input.ids],
  );
  const due = new Set(rows.map((row) => row.id));
  return input.ids.filter((id) => due.has(id));
}

/**
 * The head of each of these subscriptions' lines, when its turn has come: due and not leased.
 * Called when a delivery of the line is finished or leaves it (it is resent), to enqueue the next.
 */
export async function nextInLine(ctx: { sql: SqlClient }, subscriptionIds: string[]): Promise<string[]> {
  if (subscriptionIds.length === 0) return [];
  const rows = await ctx.sql.query<{ id: string }>(
    `SELECT h.id FROM unnest($1::text[]) AS s(id),
       LATERAL (${NEXT_IN_LINE("s.id", "l.id, l.next_attempt_at, l.leased_until")}) AS h
     WHERE h.next_attempt_at <= now() AND (h.leased_until IS NULL OR h.leased_until < now())`,
    [subscriptionIds],
  );
  return rows.map((row) => row.id);
}

export interface LineHead {
  subscriptionId: string;
  deliveryId: string;
  nextAttemptAt: Date;
  /** Due (by the grace) and not leased: it should have a job. */
  due: boolean;
}

/**
 * The heads of every ordered line, by subscription id after `after`, `limit` at a time: the
 * reconciler checks that each due one has a job, whatever became of the wake that should have
 * given it one. One probe of the line index per line (a skip scan over its subscriptions), so a
 * pass costs the number of lines, not their length.
 */
export async function lineHeads(
  ctx: { sql: SqlClient },
  input: { graceMs: number; limit: number; after?: string | undefined },
): Promise<LineHead[]> {
  const first = (after: string) =>
    `SELECT l.subscription_id, l.id, l.next_attempt_at, l.leased_until FROM deliveries l
     WHERE l.ordered AND l.next_attempt_at IS NOT NULL AND l.subscription_id > ${after}
     ORDER BY l.subscription_id, l.created_at, l.event_id LIMIT 1`;
  return ctx.sql.query<LineHead>(
    `WITH RECURSIVE head AS (
       (${first("$2::text")})
       UNION ALL
       SELECT n.* FROM head, LATERAL (${first("head.subscription_id")}) AS n
     )
     SELECT d.subscription_id AS "subscriptionId", d.id AS "deliveryId", d.next_attempt_at AS "nextAttemptAt", (${IS_DUE}) AS due
     FROM head d LIMIT $3`,
    [input.graceMs, input.after ?? "", input.limit],
  );
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
