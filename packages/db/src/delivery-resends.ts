import { nextState, PayloadDeletedError, stateOf } from "@webhooks/core";
import { Prisma, type PrismaClientOrTransaction } from "./client.ts";
import { type DeliveryRecord, getDelivery } from "./deliveries.ts";
import { type ScopedContext, scopeConditions } from "./tenant-scope.ts";

/**
 * Manual resends, the API's writes to `deliveries`: one delivery (POST /v1/deliveries/{id}/retry)
 * or a subscription's failed deliveries in a window (POST /v1/subscriptions/{id}/recover). The
 * API names the route `retry`; in the code a manual one is a *resend*, and *retry* means
 * only the automatic schedule after a failed attempt. Also the release of a subscription's
 * ordered line when its ordering is switched to "none". The other writers to `deliveries`:
 * events.ts (created), delivery-leases.ts (attempted), retention.ts (deleted).
 *
 * A resend is explicit, so it goes outside the order of an ordered subscription
 * (docs/api.md#ordered-delivery): the delivery leaves its line (`ordered` = false) and is sent at
 * once; the next of the line may then go too (the caller enqueues `nextInLine`).
 */

/**
 * Manual resend (docs/api.md#resend-a-delivery): a delivered delivery, or one that failed, is
 * queued again and attempted at once, also one waiting for a scheduled retry (the resend replaces
 * it). One already queued is left as it is: it is about to be attempted anyway, so resending is a
 * no-op. So is a resend of a delivery being attempted at this moment (a retry under way, leased):
 * that attempt is its resend, as in a recovery. Queuing it under the attempt would be undone by the
 * attempt's record, which writes the outcome and the next retry's time. The attempt uses the
 * delivery's own snapshot (url, secret, event), not the subscription's current settings. A queued
 * delivery waiting in an ordered line leaves it and goes at once. The caller enqueues the
 * delivery once this has committed, and the next of its line.
 */
export async function resendDelivery(ctx: ScopedContext, id: string): Promise<DeliveryRecord> {
  const current = await getDelivery(ctx, id);
  // docs/api.md#erase-an-events-payload: nothing is left to send. (A resend racing the erasure
  // that queues it anyway ends failed at its claim, as a queued delivery of an erased event does.)
  const [event] = await ctx.db.$queryRaw<{ erased: boolean }[]>`
    SELECT payload_deleted_at IS NOT NULL AS erased FROM events WHERE id = ${current.eventId}`;
  if (event?.erased) {
    throw new PayloadDeletedError(
      `The payload of event ${current.eventId} was erased: delivery ${id} cannot be resent`,
    );
  }
  if (current.status !== "queued") {
    const next = nextState(stateOf(current.status, current.nextRetryAt), { type: "resend" }, { retryScheduleMs: [] });
    // The status guard keeps a concurrent attempt's record from being overwritten by a stale read.
    await ctx.db.$executeRaw`
      UPDATE deliveries SET status = ${next.status}::delivery_status,
        next_attempt_at = now() + ${next.nextAttemptInMs} * interval '1 millisecond', ordered = false, updated_at = now()
      WHERE id = ${id} AND status = ${current.status}::delivery_status
        AND (leased_until IS NULL OR leased_until < now())`;
  } else {
    await ctx.db.$executeRaw`
      UPDATE deliveries SET ordered = false, updated_at = now()
      WHERE id = ${id} AND status = 'queued' AND ordered AND (leased_until IS NULL OR leased_until < now())`;
  }
  return getDelivery(ctx, id);
}

/** Deliveries resent per statement by recoverDeliveries: each batch is one short transaction. */
export const RECOVERY_BATCH_SIZE = 1_000;

export interface RecoveryWindow {
  subscriptionId: string;
  /** Inclusive lower bound on created_at. */
  since: Date;
  /** Exclusive upper bound on created_at; the start of the recovery when omitted. */
  until?: Date | undefined;
}

/** One committed batch of a recovery. */
export interface RecoveredBatch {
  /** Deliveries that were failed for good: nothing is scheduled for them, so they need a job. */
  finished: string[];
  /** Deliveries that were waiting for a retry: their (delayed) job is to run now (DeliveryQueue.enqueueResend). */
  retrying: string[];
}

/**
 * Resends every `failed` delivery of a subscription created in the window
 * (docs/api.md#recover-failed-deliveries), each as a manual resend (core's lifecycle), in batches
 * of RECOVERY_BATCH_SIZE. Each batch is one statement, committed before it is yielded, so the
 * caller enqueues each batch after its commit and holds one batch at a time however many deliveries
 * the window covers. The walk is keyset by (created_at, id), newest first, along the
 * (subscription_id, status, created_at, id) index.
 *
 * Exactly the deliveries that were failed when the recovery began are resent, each once, even if
 * the call is repeated while this one runs: a delivery counts only if its UPDATE still finds it
 * `failed` and unchanged since the recovery began (updated_at), so one resent by a concurrent
 * recovery (now queued, or failed again by a new attempt) is not resent or counted twice. A
 * delivery being attempted at this moment (leased) is skipped: that attempt is its resend.
 */
export async function* recoverDeliveries(
  ctx: ScopedContext,
  window: RecoveryWindow,
): AsyncGenerator<RecoveredBatch, { count: number; until: Date }> {
  // The scope on the deliveries themselves: a subscription's deliveries all have its tenant, so
  // this changes nothing for a subscription in scope and resends nothing for one outside it.
  const inScope = scopeConditions(ctx.scope).map((condition) => Prisma.sql`AND ${condition}`);
  const scoped = inScope.length > 0 ? Prisma.join(inScope, " ") : Prisma.empty;
  // Rounded to the millisecond as updated_at is stored (timestamptz(3)): a delivery that failed
  // in the same millisecond just before the start would otherwise look updated after it.
  const [start] = await ctx.db.$queryRaw<{ now: Date }[]>`SELECT now()::timestamptz(3) AS now`;
  const startedAt = start!.now;
  const until = window.until ?? startedAt;
  const next = nextState("failed", { type: "resend" }, { retryScheduleMs: [] });
  let cursor: { createdAt: Date; id: string } | undefined;
  let count = 0;
  for (;;) {
    const after =
      cursor === undefined ? Prisma.empty : Prisma.sql`AND (created_at, id) < (${cursor.createdAt}, ${cursor.id})`;
    const [batch] = await ctx.db.$queryRaw<
      { scanned: number; lastCreatedAt: Date | null; lastId: string | null; finished: string[]; retrying: string[] }[]
    >`
      WITH batch AS (
        SELECT id, created_at, next_attempt_at IS NOT NULL AS retrying FROM deliveries
        WHERE subscription_id = ${window.subscriptionId} AND status = 'failed'
          AND created_at >= ${window.since} AND created_at < ${until} ${after} ${scoped}
        ORDER BY created_at DESC, id DESC
        LIMIT ${RECOVERY_BATCH_SIZE}
      ), resent AS (
        UPDATE deliveries d SET status = ${next.status}::delivery_status,
          next_attempt_at = now() + ${next.nextAttemptInMs} * interval '1 millisecond', ordered = false, updated_at = now()
        FROM batch
        WHERE d.id = batch.id AND d.status = 'failed' AND d.updated_at <= ${startedAt}
          AND (d.leased_until IS NULL OR d.leased_until < now())
          -- docs/api.md#erase-an-events-payload: a delivery whose payload is gone is not resent.
          AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id AND e.payload_deleted_at IS NOT NULL)
        RETURNING d.id, batch.retrying
      ), last AS (
        SELECT created_at, id FROM batch ORDER BY created_at ASC, id ASC LIMIT 1
      )
      SELECT (SELECT count(*) FROM batch)::int AS scanned, (SELECT created_at FROM last) AS "lastCreatedAt", (SELECT id FROM last) AS "lastId",
             ARRAY(SELECT id FROM resent WHERE NOT retrying) AS finished, ARRAY(SELECT id FROM resent WHERE retrying) AS retrying`;
    if (!batch || batch.lastId === null || batch.lastCreatedAt === null) break;
    const resent = batch.finished.length + batch.retrying.length;
    count += resent;
    if (resent > 0) yield { finished: batch.finished, retrying: batch.retrying };
    if (batch.scanned < RECOVERY_BATCH_SIZE) break;
    cursor = { createdAt: batch.lastCreatedAt, id: batch.lastId };
  }
  return { count, until };
}

/**
 * A switch of the subscription's ordering to "none" (docs/api.md#ordered-delivery): its line is
 * released, every delivery waiting in it going at once. Run in the transaction of the switch, so
 * that the subscription is never "none" with a line still held. Those queued become due now (they
 * were waiting for their turn, not for a time: the reconciler's next pass sees them as just due);
 * one waiting for a retry keeps the retry's time. Returns the deliveries released; the caller
 * enqueues them once this has committed.
 */
export async function releaseLine(db: PrismaClientOrTransaction, subscriptionId: string): Promise<string[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    UPDATE deliveries SET ordered = false, next_attempt_at = greatest(next_attempt_at, now()), updated_at = now()
    WHERE subscription_id = ${subscriptionId} AND ordered AND next_attempt_at IS NOT NULL
    RETURNING id`;
  return rows.map((row) => row.id);
}
