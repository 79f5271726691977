import type { SqlClient } from "./sql.ts";

/**
 * Retention (docs/api.md#retention): finished deliveries (delivered, or failed with no retry
 * planned) created before a cutoff are deleted with their attempts, and then events older than the
 * cutoff that have no delivery left, and endpoint credentials retired a while ago that no
 * delivery refers to any more. Queued deliveries and those with a retry planned are never
 * touched.
 *
 * Every statement here deletes a bounded batch and is its own short transaction (autocommit), so
 * a pass never holds locks or a snapshot for long, and can stop between any two batches.
 *
 * The only deletes from `deliveries`. Its other writers: events.ts (created), delivery-leases.ts
 * (attempted), delivery-resends.ts (resent).
 */

export interface PrunedRows {
  deliveries: number;
  attempts: number;
  events: number;
  /** endpoint_credentials rows: retired ones no delivery refers to any more. */
  credentials: number;
}

export interface DeliveryCursor {
  createdAt: Date;
  id: string;
}

export interface DeliveryBatch {
  /** Deliveries deleted, and their attempts. */
  deliveries: number;
  attempts: number;
  /** Candidates this batch took (deleted ones, at most the limit): fewer than the limit means the end. */
  taken: number;
  /** The last candidate, to start the next batch after; undefined when none was taken. */
  last: DeliveryCursor | undefined;
}

/**
 * Deletes up to `limit` finished deliveries with the given status created before `before`, oldest
 * first after `after`, with their attempts, in one statement.
 *
 * It walks deliveries_status_created_at_id_idx: within one status, oldest first, so it reads the
 * candidates and the few rows it must pass over (failed ones with a retry planned), never the
 * table. The caller passes the last batch's cursor, so a pass reads each row it keeps once, not
 * once per batch.
 *
 * The candidates are locked FOR UPDATE SKIP LOCKED, and the status and next_attempt_at are checked
 * again on the locked row: a delivery being resent at this instant (POST .../retry makes it
 * queued) is either skipped or seen queued, never deleted; a delivery whose row another pruner
 * holds is skipped, so two pruners never delete (or count) the same row. Attempts go in the same
 * statement, so a delivery never loses its log and stays, and no attempt outlives its delivery
 * (delivery_attempts.delivery_id has no foreign key to say so: see prisma/schema.prisma).
 *
 * Both pruning statements commit without waiting for the disk (synchronous_commit off for their
 * own transaction): a delete lost in a database crash is done again by the next pass, and the
 * publishes committing meanwhile do not queue behind the pruner's flushes.
 */
export async function pruneFinishedDeliveries(
  ctx: { sql: SqlClient },
  input: { status: "delivered" | "failed"; before: Date; limit: number; after?: DeliveryCursor | undefined },
): Promise<DeliveryBatch> {
  const [row] = await ctx.sql.query<{
    taken: number;
    deliveries: number;
    attempts: number;
    lastCreatedAt: Date | null;
    lastId: string | null;
  }>(
    `WITH batch AS (
       SELECT id, created_at FROM deliveries
       WHERE status = $1::delivery_status AND next_attempt_at IS NULL AND created_at < $2::timestamptz
         AND (created_at, id) > (COALESCE($3::timestamptz, '-infinity'::timestamptz), $4::text)
       ORDER BY created_at, id
       LIMIT $5
       FOR UPDATE SKIP LOCKED
     ), attempts AS (
       DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM batch) RETURNING 1
     ), deleted AS (
       DELETE FROM deliveries WHERE id IN (SELECT id FROM batch) RETURNING 1
     ), last AS (
       SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1
     )
     SELECT set_config('synchronous_commit', 'off', true) AS "asyncCommit",
            (SELECT count(*) FROM batch)::int AS taken,
            (SELECT count(*) FROM deleted)::int AS deliveries,
            (SELECT count(*) FROM attempts)::int AS attempts,
            (SELECT created_at FROM last) AS "lastCreatedAt",
            (SELECT id FROM last) AS "lastId"`,
    [
      input.status,
      input.before.toISOString(),
      input.after?.createdAt.toISOString() ?? null,
      input.after?.id ?? "",
      input.limit,
    ],
  );
  return {
    deliveries: row!.deliveries,
    attempts: row!.attempts,
    taken: row!.taken,
    last: row!.lastCreatedAt && row!.lastId ? { createdAt: row!.lastCreatedAt, id: row!.lastId } : undefined,
  };
}

export interface EventBatch {
  events: number;
  /** Events this batch looked at: fewer than the limit means the end of the table. */
  scanned: number;
  /** The last event looked at, to start the next batch after. */
  last: string | undefined;
  /** True when it looked at an event created at or after `before`: the walk is done. */
  reachedCutoff: boolean;
}

/**
 * Looks at the next `limit` events after `after` in id order and deletes those created before
 * `before` that have no delivery left (their deliveries were pruned, or nothing matched them).
 *
 * Event ids are ULIDs, so id order is creation order: the walk reads the primary
 * key from the oldest event and stops at the first one newer than the cutoff, without an index on
 * events.created_at (which every publish would pay for). The deliveries check uses
 * deliveries_event_id_idx. It is final: deliveries.event_id has no foreign key, but no delivery is
 * ever added to an event after the statement that inserted it (events.ts), so an event found
 * without deliveries here keeps none.
 */
export async function pruneEventsWithoutDeliveries(
  ctx: { sql: SqlClient },
  input: { before: Date; limit: number; after?: string | undefined },
): Promise<EventBatch> {
  const [row] = await ctx.sql.query<{
    scanned: number;
    events: number;
    last: string | null;
    reachedCutoff: boolean | null;
  }>(
    `WITH page AS (
       SELECT id, created_at FROM events WHERE id > $1::text ORDER BY id LIMIT $2
     ), doomed AS (
       SELECT e.id FROM events e
       WHERE e.id IN (SELECT id FROM page WHERE created_at < $3::timestamptz)
         AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
       FOR UPDATE SKIP LOCKED
     ), deleted AS (
       DELETE FROM events WHERE id IN (SELECT id FROM doomed) RETURNING 1
     )
     SELECT set_config('synchronous_commit', 'off', true) AS "asyncCommit",
            (SELECT count(*) FROM page)::int AS scanned,
            (SELECT count(*) FROM deleted)::int AS events,
            (SELECT max(id) FROM page) AS last,
            (SELECT bool_or(created_at >= $3::timestamptz) FROM page) AS "reachedCutoff"`,
    [input.after ?? "", input.limit, input.before.toISOString()],
  );
  return {
    events: row!.events,
    scanned: row!.scanned,
    last: row!.last ?? undefined,
    reachedCutoff: row!.reachedCutoff ?? false,
  };
}

/**
 * A retired credentials row is kept this long at least: a publish that read its subscription just
 * before the change may still be inserting deliveries that refer to it.
 */
export const RETIRED_CREDENTIALS_GRACE_MS = 60 * 60 * 1000;

export interface CredentialsBatch {
  credentials: number;
  /** Retired rows this batch looked at: fewer than the limit means the end. */
  scanned: number;
  /** The last row looked at, to start the next batch after. */
  last: string | undefined;
}

/**
 * Looks at the next `limit` endpoint_credentials rows after `after` (id order) retired before
 * `retiredBefore`, and deletes those no delivery refers to (deliveries_credentials_id_idx).
 *
 * A row is retired when its subscription stops using it (a PUT replaced it, or the subscription
 * was deleted), and no delivery is created with it after that, except by a publish that read the
 * subscription just before: the caller's grace, far longer than any publish statement, covers
 * those. Once none refers to it, none ever will again: a resend reuses its delivery's own row.
 */
export async function pruneRetiredCredentials(
  ctx: { sql: SqlClient },
  input: { retiredBefore: Date; limit: number; after?: string | undefined },
): Promise<CredentialsBatch> {
  const [row] = await ctx.sql.query<{ scanned: number; credentials: number; last: string | null }>(
    `WITH page AS (
       SELECT id FROM endpoint_credentials
       WHERE retired_at < $1::timestamptz AND id > $2::text
       ORDER BY id LIMIT $3
     ), doomed AS (
       SELECT c.id FROM endpoint_credentials c
       WHERE c.id IN (SELECT id FROM page)
         AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.credentials_id = c.id)
       FOR UPDATE SKIP LOCKED
     ), deleted AS (
       DELETE FROM endpoint_credentials WHERE id IN (SELECT id FROM doomed) RETURNING 1
     )
     SELECT set_config('synchronous_commit', 'off', true) AS "asyncCommit",
            (SELECT count(*) FROM page)::int AS scanned,
            (SELECT count(*) FROM deleted)::int AS credentials,
            (SELECT max(id) FROM page) AS last`,
    [input.retiredBefore.toISOString(), input.after ?? "", input.limit],
  );
  return { credentials: row!.credentials, scanned: row!.scanned, last: row!.last ?? undefined };
}

export interface PrunePass extends PrunedRows {
  /** Statements run: one per batch. */
  batches: number;
  /** False when `shouldStop` ended the pass between two batches. */
  complete: boolean;
}

/**
 * One pruning pass: finished deliveries created more than `retentionMs` ago (measured on the
 * database's clock, which created_at is), delivered ones then failed ones, batch by batch; then
 * the events left without deliveries; then the endpoint credentials retired more than
 * `credentialsGraceMs` ago that no delivery refers to. `rest`, when given, is awaited before every batch but the
 * first, with how long the previous batch took: the caller's pause, which spreads a long pass out
 * so that it does not keep a backend busy without a break. `shouldStop` is asked after it, before
 * every batch, so a worker that is shutting down stops between two short statements. `onBatch` is
 * told what each batch deleted, once it has committed: a pass that fails later (a pass over a big
 * backlog of expired rows runs for minutes) has still deleted those.
 */
export async function pruneExpired(
  ctx: { sql: SqlClient },
  input: {
    retentionMs: number;
    batchSize: number;
    /** How long a retired credentials row is kept at least; RETIRED_CREDENTIALS_GRACE_MS by default. */
    credentialsGraceMs?: number | undefined;
    shouldStop?: (() => boolean) | undefined;
    rest?: ((lastBatchMs: number) => Promise<void>) | undefined;
    onBatch?: ((deleted: PrunedRows) => void) | undefined;
  },
): Promise<PrunePass> {
  const shouldStop = input.shouldStop ?? (() => false);
  const [cutoff] = await ctx.sql.query<{ before: Date; retiredBefore: Date }>(
    `SELECT now() - $1::bigint * interval '1 millisecond' AS before,
            now() - $2::bigint * interval '1 millisecond' AS "retiredBefore"`,
    [input.retentionMs, input.credentialsGraceMs ?? RETIRED_CREDENTIALS_GRACE_MS],
  );
  const { before, retiredBefore } = cutoff!;
  const pass: PrunePass = { deliveries: 0, attempts: 0, events: 0, credentials: 0, batches: 0, complete: false };
  let lastBatchMs = 0;
  /** Rests (after a batch), then tells whether to go on. */
  const goOn = async (): Promise<boolean> => {
    if (pass.batches > 0 && input.rest) await input.rest(lastBatchMs);
    return !shouldStop();
  };
  const timed = async <T>(batch: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const result = await batch();
    lastBatchMs = performance.now() - started;
    pass.batches++;
    return result;
  };

  for (const status of ["delivered", "failed"] as const) {
    let after: DeliveryCursor | undefined;
    for (;;) {
      if (!(await goOn())) return pass;
      const batch = await timed(() => pruneFinishedDeliveries(ctx, { status, before, limit: input.batchSize, after }));
      pass.deliveries += batch.deliveries;
      pass.attempts += batch.attempts;
      input.onBatch?.({ deliveries: batch.deliveries, attempts: batch.attempts, events: 0, credentials: 0 });
      if (batch.taken < input.batchSize || !batch.last) break;
      after = batch.last;
    }
  }

  let after: string | undefined;
  for (;;) {
    if (!(await goOn())) return pass;
    const batch = await timed(() => pruneEventsWithoutDeliveries(ctx, { before, limit: input.batchSize, after }));
    pass.events += batch.events;
    input.onBatch?.({ deliveries: 0, attempts: 0, events: batch.events, credentials: 0 });
    if (batch.reachedCutoff || batch.scanned < input.batchSize || !batch.last) break;
    after = batch.last;
  }

  // Last: the deliveries deleted above may have been the last to refer to some credentials.
  let afterCredentials: string | undefined;
  for (;;) {
    if (!(await goOn())) return pass;
    const batch = await timed(() =>
      pruneRetiredCredentials(ctx, { retiredBefore, limit: input.batchSize, after: afterCredentials }),
    );
    pass.credentials += batch.credentials;
    input.onBatch?.({ deliveries: 0, attempts: 0, events: 0, credentials: batch.credentials });
    if (batch.scanned < input.batchSize || !batch.last) break;
    afterCredentials = batch.last;
  }
  pass.complete = true;
  return pass;
}

/** Every worker runs a pruner; this lock lets one of them prune at a time. 'whprune' in ASCII. */
const PRUNER_LOCK_KEY = 0x77687072756e65n.toString();

/**
 * Runs `work` if this process can take the pruner's lock, held on one connection for the whole
 * pass (a session lock: the pass is many short transactions, and must not be one long one).
 * Returns undefined when another process holds it. The batches are safe without it (they skip
 * rows another pruner holds); the lock saves N workers walking the same rows.
 */
export async function withPrunerLock<T>(
  ctx: { sql: SqlClient },
  work: (sql: SqlClient) => Promise<T>,
): Promise<T | undefined> {
  return ctx.sql.withConnection(async (sql) => {
    const [lock] = await sql.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS locked", [
      PRUNER_LOCK_KEY,
    ]);
    if (!lock?.locked) return undefined;
    try {
      return await work(sql);
    } finally {
      await sql.query("SELECT pg_advisory_unlock($1::bigint)", [PRUNER_LOCK_KEY]);
    }
  });
}
