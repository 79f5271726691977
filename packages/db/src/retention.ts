import { erasePayloadsBefore } from "./payload-erasure.ts";
import type { SqlClient } from "./sql.ts";

/**
 * Retention (docs/api.md#retention): finished deliveries (delivered, or failed with no retry
 * planned) created before a cutoff are deleted with their attempts, and events older than the
 * cutoff that have no delivery left. Queued deliveries and those with a retry planned are never
 * touched. Before that, payloads older than PAYLOAD_RETENTION are erased (payload-erasure.ts);
 * after it, endpoint credentials retired a while ago that no delivery refers to any more go.
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
  /** Events whose payload was erased (PAYLOAD_RETENTION); they stay, without it. */
  payloads: number;
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
  /** The last event passed (looked at and older than `before`), to start the next batch after. */
  last: string | undefined;
  /**
   * The created_at of the first event looked at that is not older than `before`, where the walk
   * stopped; undefined when it met none. A later batch can go further only with a later `before`.
   */
  stoppedAt: Date | undefined;
}

/**
 * Looks at the next `limit` events after `after` in id order and deletes those created before
 * `before` that have no delivery left (their deliveries were pruned, or nothing matched them).
 *
 * Event ids are ULIDs, so id order is creation order: the walk reads the primary key from the
 * oldest event and stops at the first one newer than the cutoff, without an index on
 * events.created_at (which every publish would pay for). `last` is the event before that one, not
 * the end of the page, so that a walk whose cutoff moves on (pruneExpired's frontier) looks at it,
 * and those after it, again; an older one after it in the page (ids and created_at come from two
 * clocks) is deleted now all the same. The deliveries check uses deliveries_event_id_idx. It is final: deliveries.event_id has
 * no foreign key, but no delivery is ever added to an event after the statement that inserted it
 * (events.ts), so an event found without deliveries here keeps none.
 */
export async function pruneEventsWithoutDeliveries(
  ctx: { sql: SqlClient },
  input: { before: Date; limit: number; after?: string | undefined },
): Promise<EventBatch> {
  const [row] = await ctx.sql.query<{
    scanned: number;
    events: number;
    last: string | null;
    stoppedAt: Date | null;
  }>(
    `WITH page AS (
       SELECT id, created_at FROM events WHERE id > $1::text ORDER BY id LIMIT $2
     ), stop AS (
       SELECT id, created_at FROM page WHERE created_at >= $3::timestamptz ORDER BY id LIMIT 1
     ), passed AS (
       SELECT id FROM page WHERE NOT EXISTS (SELECT 1 FROM stop WHERE stop.id <= page.id)
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
            (SELECT max(id) FROM passed) AS last,
            (SELECT created_at FROM stop) AS "stoppedAt"`,
    [input.after ?? "", input.limit, input.before.toISOString()],
  );
  return {
    events: row!.events,
    scanned: row!.scanned,
    last: row!.last ?? input.after,
    stoppedAt: row!.stoppedAt ?? undefined,
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
 * One pruning pass, with the cutoffs measured on the database's clock, which created_at is:
 * 1. payloads of events created more than `payloadRetentionMs` ago are erased, batch by batch
 *    (none when it is undefined), ending their deliveries still to be sent;
 * 2. finished deliveries created more than `retentionMs` ago (none when it is undefined) are
 *    deleted, and the events left without deliveries. The two walks over deliveries (delivered,
 *    failed) take turns, a batch each, and the events walk follows behind them: after each turn
 *    it deletes the events created before the point both walks have passed. So a pass deletes
 *    events as it goes, not only once it has walked every expired delivery (which on a large log
 *    takes hours, and a worker that stops before the end would never have reached them);
 * 3. endpoint credentials retired more than `credentialsGraceMs` ago that no delivery refers to
 *    are deleted.
 *
 * `rest`, when given, is awaited before every batch but the first, with how long the previous
 * batch took: the caller's pause, which spreads a long pass out so that it does not keep a backend
 * busy without a break. `shouldStop` is asked after it, before every batch, so a worker that is
 * shutting down stops between two short statements. `onBatch` is told what each batch deleted,
 * once it has committed: a pass that fails later (a pass over a big backlog of expired rows runs
 * for minutes) has still deleted those.
 */
export async function pruneExpired(
  ctx: { sql: SqlClient },
  input: {
    retentionMs: number | undefined;
    payloadRetentionMs?: number | undefined;
    batchSize: number;
    /** How long a retired credentials row is kept at least; RETIRED_CREDENTIALS_GRACE_MS by default. */
    credentialsGraceMs?: number | undefined;
    shouldStop?: (() => boolean) | undefined;
    rest?: ((lastBatchMs: number) => Promise<void>) | undefined;
    onBatch?: ((deleted: PrunedRows) => void) | undefined;
  },
): Promise<PrunePass> {
  const shouldStop = input.shouldStop ?? (() => false);
  const limit = input.batchSize;
  const [cutoffs] = await ctx.sql.query<{ before: Date | null; payloadsBefore: Date | null; retiredBefore: Date }>(
    `SELECT now() - $1::bigint * interval '1 millisecond' AS before,
            now() - $2::bigint * interval '1 millisecond' AS "payloadsBefore",
            now() - $3::bigint * interval '1 millisecond' AS "retiredBefore"`,
    [
      input.retentionMs ?? null,
      input.payloadRetentionMs ?? null,
      input.credentialsGraceMs ?? RETIRED_CREDENTIALS_GRACE_MS,
    ],
  );
  const pass: PrunePass = {
    deliveries: 0,
    attempts: 0,
    events: 0,
    payloads: 0,
    credentials: 0,
    batches: 0,
    complete: false,
  };
  let lastBatchMs = 0;
  /** Rests (after a batch), then tells whether to go on. */
  const goOn = async (): Promise<boolean> => {
    if (pass.batches > 0 && input.rest) await input.rest(lastBatchMs);
    return !shouldStop();
  };
  /** Runs one batch, timed, and counts and reports what it deleted. */
  const run = async <T>(batch: () => Promise<T>, deleted: (result: T) => Partial<PrunedRows>): Promise<T> => {
    const started = performance.now();
    const result = await batch();
    lastBatchMs = performance.now() - started;
    pass.batches++;
    const rows = { deliveries: 0, attempts: 0, events: 0, payloads: 0, credentials: 0, ...deleted(result) };
    for (const key of ["deliveries", "attempts", "events", "payloads", "credentials"] as const) pass[key] += rows[key];
    input.onBatch?.(rows);
    return result;
  };

  /** Step 2 below; false when the pass was told to stop. */
  const pruneDeliveriesAndEvents = async (before: Date): Promise<boolean> => {
    const walks = (["delivered", "failed"] as const).map((status) => ({
      status,
      after: undefined as DeliveryCursor | undefined,
      done: false,
    }));
    let eventsAfter: string | undefined;
    /** Where the events walk stopped: it can go on once the deliveries walks are past it. */
    let eventsStoppedAt: Date | undefined;
    for (;;) {
      for (const walk of walks.filter((w) => !w.done)) {
        if (!(await goOn())) return false;
        const batch = await run(
          () => pruneFinishedDeliveries(ctx, { status: walk.status, before, limit, after: walk.after }),
          (b) => ({ deliveries: b.deliveries, attempts: b.attempts }),
        );
        walk.done = batch.taken < limit || !batch.last;
        walk.after = batch.last;
      }
      // Every delivery of an event shares its created_at, so an event created before the point
      // both walks go on from has had each of its finished deliveries looked at.
      const finished = walks.every((w) => w.done);
      const frontier = walks.reduce(
        (min, w) => (!w.done && w.after && w.after.createdAt < min ? w.after.createdAt : min),
        before,
      );
      while (eventsStoppedAt === undefined || eventsStoppedAt < frontier) {
        if (!(await goOn())) return false;
        const batch = await run(
          () => pruneEventsWithoutDeliveries(ctx, { before: frontier, limit, after: eventsAfter }),
          (b) => ({ events: b.events }),
        );
        eventsAfter = batch.last;
        eventsStoppedAt = batch.stoppedAt;
        // The end of the table: nothing more until the walks move on (or, finished, ever).
        if (batch.stoppedAt === undefined && batch.scanned < limit) {
          eventsStoppedAt = frontier;
          break;
        }
      }
      if (finished) break;
    }
    return true;
  };

  // 1. Payloads (payload-erasure.ts), from where the last pass stopped.
  const payloadsBefore = cutoffs!.payloadsBefore;
  for (let done = payloadsBefore === null; !done; ) {
    if (!(await goOn())) return pass;
    const batch = await run(
      () => erasePayloadsBefore(ctx, { before: payloadsBefore!, limit }),
      (b) => ({ payloads: b.events }),
    );
    done = batch.done;
  }

  // 2. Deliveries, and the events behind them (none when RETENTION is off).
  const before = cutoffs!.before;
  if (before !== null && !(await pruneDeliveriesAndEvents(before))) return pass;

  // 3. Last: the deliveries deleted above may have been the last to refer to some credentials.
  let afterCredentials: string | undefined;
  for (let done = false; !done; ) {
    if (!(await goOn())) return pass;
    const batch = await run(
      () => pruneRetiredCredentials(ctx, { retiredBefore: cutoffs!.retiredBefore, limit, after: afterCredentials }),
      (b) => ({ credentials: b.credentials }),
    );
    done = batch.scanned < limit || !batch.last;
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
