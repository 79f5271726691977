import { NotFoundError } from "@webhooks/core";
import type { EventRecord } from "./events.ts";
import type { SqlClient } from "./sql.ts";
import type { TenantScope } from "./tenant-scope.ts";

/**
 * Payload erasure (docs/api.md#erase-an-events-payload): an event's `data` becomes null and
 * `payload_deleted_at` records when, by DELETE /v1/events/{id}/payload or, once older than
 * PAYLOAD_RETENTION, by the pruner. The event, its deliveries and their attempts keep their
 * metadata until RETENTION.
 *
 * A delivery that still had an attempt to come ends `failed`, with `failure_reason`
 * "payload_deleted", in the statement that erases: there is nothing left to send. One being
 * attempted at that moment (leased, or with an attempt open) is left to its attempt, which
 * already carries the payload; if that attempt plans a retry, the worker that claims the retry
 * finds the payload gone and ends the delivery the same way (delivery-leases.ts,
 * endDeliveriesWithoutPayload).
 *
 * A writer of `deliveries` beside those of delivery-leases.ts: this ends deliveries for erasure.
 */

export const PAYLOAD_DELETED = "payload_deleted";

/**
 * The erasure of the events that `$events` (a query yielding `id`) names, as CTEs: `erased` (the
 * events erased now; one erased before is left as it is, so its payload_deleted_at stays) and
 * `ended` (the deliveries ended for it).
 */
const eraseSql = (events: string) => `
  erased AS (
    UPDATE events e SET data = NULL, payload_deleted_at = now()
    WHERE e.id IN (${events}) AND e.payload_deleted_at IS NULL
    RETURNING e.id
  ), ended AS (
    UPDATE deliveries d SET status = 'failed', next_attempt_at = NULL, failure_reason = '${PAYLOAD_DELETED}', updated_at = now()
    WHERE d.event_id IN (SELECT id FROM erased) AND d.next_attempt_at IS NOT NULL
      AND d.open_attempt_id IS NULL AND (d.leased_until IS NULL OR d.leased_until < now())
    RETURNING d.id
  )`;

/**
 * Erases one event's payload, in the caller's scope: another tenant's event is not found, and is
 * not touched (the scope is part of the statement that erases). Idempotent: erasing it again
 * changes nothing and answers the event as it is, with the first erasure's time.
 */
export async function eraseEventPayload(
  ctx: { sql: SqlClient; scope: TenantScope },
  id: string,
): Promise<{ event: EventRecord; endedDeliveries: number }> {
  const tenantId = ctx.scope.kind === "tenant" ? ctx.scope.tenantId : null;
  const [row] = await ctx.sql.query<EventRecord & { ended: number }>(
    `WITH target AS (
       SELECT id FROM events WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)
     ), ${eraseSql("SELECT id FROM target")}
     SELECT e.id, e.type, NULL::jsonb AS data, e.tenant_id AS "tenantId", e.created_at AS "createdAt",
            coalesce(e.payload_deleted_at, now()::timestamptz(3)) AS "payloadDeletedAt",
            (SELECT count(*) FROM ended)::int AS ended
     FROM events e JOIN target t ON t.id = e.id`,
    [id, tenantId],
  );
  if (!row) throw new NotFoundError(`No such event: ${id}`, "event_id");
  const { ended, ...event } = row;
  return { event, endedDeliveries: ended };
}

/** The pruner's cursor for the erasure walk, in pruner_cursors. */
const ERASURE_CURSOR = "payload_erasure";

export interface ErasureBatch {
  /** Payloads erased, and deliveries ended for them. */
  events: number;
  deliveries: number;
  /** True when the walk is done for this pass: it reached an event not older than `before`, or the last event. */
  done: boolean;
}

/**
 * One batch of PAYLOAD_RETENTION (docs/api.md#payload-retention): looks at the next `limit`
 * events in id order after the walk's cursor, and erases the payloads of those before the first
 * one created at or after `before`, as eraseEventPayload does. Then moves the cursor past them,
 * in the same statement.
 *
 * Event ids are ULIDs, so id order is creation order, and every event before the cursor is
 * erased: each pass goes on from where the last stopped instead of reading again, from the
 * oldest, the events whose payloads are gone and whose metadata is kept until RETENTION. The
 * cursor stops before the first event not yet due (not after the page), so an event whose id and
 * created_at disagree by a clock's skew is waited for, not skipped. Committed without waiting for
 * the disk, like the pruner's deletes: a batch lost in a database crash is done again.
 */
export async function erasePayloadsBefore(
  ctx: { sql: SqlClient },
  input: { before: Date; limit: number },
): Promise<ErasureBatch> {
  const [row] = await ctx.sql.query<{ events: number; deliveries: number; scanned: number; reachedCutoff: boolean }>(
    `WITH page AS (
       SELECT id, created_at FROM events
       WHERE id > coalesce((SELECT after FROM pruner_cursors WHERE name = '${ERASURE_CURSOR}'), '')
       ORDER BY id LIMIT $2
     ), stop AS (
       SELECT min(id) AS id FROM page WHERE created_at >= $1::timestamptz
     ), passed AS (
       SELECT page.id FROM page, stop WHERE stop.id IS NULL OR page.id < stop.id
     ), ${eraseSql("SELECT id FROM passed")}, moved AS (
       INSERT INTO pruner_cursors (name, after)
       SELECT '${ERASURE_CURSOR}', max(id) FROM passed HAVING count(*) > 0
       ON CONFLICT (name) DO UPDATE SET after = excluded.after
       RETURNING 1
     )
     SELECT set_config('synchronous_commit', 'off', true) AS "asyncCommit",
            (SELECT count(*) FROM erased)::int AS events, (SELECT count(*) FROM ended)::int AS deliveries,
            (SELECT count(*) FROM page)::int AS scanned, (SELECT id FROM stop) IS NOT NULL AS "reachedCutoff",
            (SELECT count(*) FROM moved)::int AS moved`,
    [input.before.toISOString(), input.limit],
  );
  return {
    events: row!.events,
    deliveries: row!.deliveries,
    done: row!.reachedCutoff || row!.scanned < input.limit,
  };
}
