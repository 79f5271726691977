import { isId, nextState, NotFoundError, stateOf, type DeliveryStatus } from "@webhooks/core";
import { Prisma } from "./client.ts";
import { fetchPage, type Page, type PageQuery, type PageRequest } from "./paging.ts";
import { scopeConditions, type ScopedContext, type TenantScope } from "./tenant-scope.ts";

export interface DeliveryRecord {
  id: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  responseCode: number | null;
  nextRetryAt: Date | null;
  /** The event's tenant, which is its subscription's (contract §13), or null. */
  tenantId: string | null;
  createdAt: Date;
}

export interface AttemptRecord {
  id: string;
  deliveryId: string;
  number: number;
  url: string;
  startedAt: Date;
  durationMs: number | null;
  responseCode: number | null;
  responseBody: string | null;
  error: string | null;
}

export interface DeliveryFilters {
  subscriptionId?: string | undefined;
  status?: DeliveryStatus | undefined;
  eventType?: string | undefined;
  /** Inclusive lower bound on created_at (spec §4.1). */
  since?: Date | undefined;
  /** Exclusive upper bound on created_at (contract §4). */
  until?: Date | undefined;
  /** The last response's status: an exact code, or a class (5 for 5xx) (contract §12). */
  responseCode?: ResponseCodeFilter | undefined;
  /** Only this tenant's deliveries (contract §13); ANDed with the caller's scope. */
  tenantId?: string | undefined;
}

export type ResponseClass = 2 | 3 | 4 | 5;
export type ResponseCodeFilter = { code: number } | { class: ResponseClass };

/**
 * A class as the predicate of its partial index (prisma/schema.prisma), literally: the planner
 * uses a partial index only when it can prove the query implies its predicate, which it cannot
 * do with bind parameters.
 */
const responseClassPredicates: Record<ResponseClass, Prisma.Sql> = {
  2: Prisma.raw("(response_code >= 200) AND (response_code < 300)"),
  3: Prisma.raw("(response_code >= 300) AND (response_code < 400)"),
  4: Prisma.raw("(response_code >= 400) AND (response_code < 500)"),
  5: Prisma.raw("(response_code >= 500) AND (response_code < 600)"),
};

// next_attempt_at is also set while a delivery is queued; only a failed delivery has a retry.
const deliveryColumns = Prisma.sql`
  id, subscription_id AS "subscriptionId", event_id AS "eventId", event_type AS "eventType",
  status::text AS status, attempts, response_code AS "responseCode",
  CASE WHEN status = 'failed' THEN next_attempt_at END AS "nextRetryAt", tenant_id AS "tenantId", created_at AS "createdAt"`;

/** The delivery log, newest first (spec §4.1, contract §4). */
export async function listDeliveries(ctx: ScopedContext, filters: DeliveryFilters, page: PageRequest): Promise<Page<DeliveryRecord>> {
  return fetchPage<DeliveryRecord>(ctx.db, deliveryListQuery(ctx.scope, filters), page);
}

/** What listDeliveries reads, for the caller's scope and the filters (exported for EXPLAIN in tests). */
export function deliveryListQuery(scope: TenantScope, filters: DeliveryFilters): PageQuery {
  const where: Prisma.Sql[] = [];
  // The tenant conditions: the caller's scope, and the tenant_id filter. A delivery's tenant is
  // its subscription's, so with a subscription_id they are checked once on that subscription (an
  // uncorrelated EXISTS, which PostgreSQL evaluates once, before the walk) and the walk follows
  // the subscription's indexes; on deliveries they would let the planner walk the tenant's index
  // instead, or walk a whole subscription of another tenant finding nothing.
  const tenants = [...scopeConditions(scope)];
  if (filters.tenantId !== undefined) tenants.push(Prisma.sql`tenant_id = ${filters.tenantId}`);
  if (filters.subscriptionId !== undefined) {
    where.push(Prisma.sql`subscription_id = ${filters.subscriptionId}`);
    for (const tenant of tenants) where.push(Prisma.sql`EXISTS (SELECT 1 FROM subscriptions WHERE id = ${filters.subscriptionId} AND ${tenant})`);
  } else {
    // Along the partial per-tenant indexes (prisma/schema.prisma): `tenant_id = $1` implies their
    // `tenant_id IS NOT NULL`, and a response class repeats its literal predicate below.
    where.push(...tenants);
  }
  if (filters.status !== undefined) where.push(Prisma.sql`status = ${filters.status}::delivery_status`);
  if (filters.eventType !== undefined) where.push(Prisma.sql`event_type = ${filters.eventType}`);
  if (filters.since !== undefined) where.push(Prisma.sql`created_at >= ${filters.since}`);
  if (filters.until !== undefined) where.push(Prisma.sql`created_at < ${filters.until}`);
  const responseCode = filters.responseCode;
  if (responseCode !== undefined) {
    where.push("code" in responseCode ? Prisma.sql`response_code = ${responseCode.code}` : responseClassPredicates[responseCode.class]);
  }
  return { table: "deliveries", timeColumn: "created_at", columns: deliveryColumns, filters: where, resource: "delivery", cursorScope: scopeConditions(scope) };
}

export async function getDelivery(ctx: ScopedContext, id: string): Promise<DeliveryRecord> {
  if (!isId("delivery", id)) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  const where = Prisma.join([Prisma.sql`id = ${id}`, ...scopeConditions(ctx.scope)], " AND ");
  const [delivery] = await ctx.db.$queryRaw<DeliveryRecord[]>`SELECT ${deliveryColumns} FROM deliveries WHERE ${where}`;
  if (!delivery) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  return delivery;
}

/** A delivery's attempt log (contract §5), newest first. */
export async function listAttempts(
  ctx: ScopedContext,
  deliveryId: string,
  page: PageRequest,
): Promise<Page<AttemptRecord>> {
  await getDelivery(ctx, deliveryId);
  return fetchPage<AttemptRecord>(
    ctx.db,
    {
      table: "delivery_attempts",
      timeColumn: "started_at",
      columns: Prisma.sql`
        id, delivery_id AS "deliveryId", number, url, started_at AS "startedAt", duration_ms AS "durationMs",
        response_code AS "responseCode", response_body AS "responseBody", error`,
      filters: [Prisma.sql`delivery_id = ${deliveryId}`],
      resource: "attempt",
      // Attempts have no tenant column: an attempt is in scope when its delivery is.
      cursorScope: scopeConditions(ctx.scope, Prisma.raw("deliveries.tenant_id")).map(
        (inScope) => Prisma.sql`EXISTS (SELECT 1 FROM deliveries WHERE deliveries.id = delivery_attempts.delivery_id AND ${inScope})`,
      ),
    },
    page,
  );
}

/**
 * Manual resend (contract §5): a delivered delivery, or one that failed, is queued again and
 * attempted at once. One waiting for a scheduled retry is brought forward. One that is already
 * queued is left as it is: it is about to be attempted anyway, so resending is a no-op.
 * The attempt uses the delivery's own snapshot (url, secret, event), not the subscription's
 * current settings (contract §8). The caller enqueues the delivery once this has committed.
 */
export async function resendDelivery(ctx: ScopedContext, id: string): Promise<DeliveryRecord> {
  const current = await getDelivery(ctx, id);
  if (current.status !== "queued") {
    const next = nextState(stateOf(current.status, current.nextRetryAt), { type: "resend" }, { retryScheduleMs: [] });
    // The status guard keeps a concurrent attempt's record from being overwritten by a stale read.
    await ctx.db.$executeRaw`
      UPDATE deliveries SET status = ${next.status}::delivery_status,
        next_attempt_at = now() + ${next.nextAttemptInMs} * interval '1 millisecond', updated_at = now()
      WHERE id = ${id} AND status = ${current.status}::delivery_status`;
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
  /** Deliveries that were waiting for a retry: their retry's (delayed) job is to be brought forward. */
  retrying: string[];
}

/**
 * Contract §12: resends every `failed` delivery of a subscription created in the window, each as
 * a manual resend (core's lifecycle), in batches of RECOVERY_BATCH_SIZE. Each batch is one
 * statement, committed before it is yielded, so the caller enqueues each batch after its commit
 * and holds one batch at a time however many deliveries the window covers. The walk is keyset by
 * (created_at, id), newest first, along the (subscription_id, status, created_at, id) index.
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
  const [start] = await ctx.db.$queryRaw<{ now: Date }[]>`SELECT now() AS now`;
  const startedAt = start!.now;
  const until = window.until ?? startedAt;
  const next = nextState("failed", { type: "resend" }, { retryScheduleMs: [] });
  let cursor: { createdAt: Date; id: string } | undefined;
  let count = 0;
  for (;;) {
    const after = cursor === undefined ? Prisma.empty : Prisma.sql`AND (created_at, id) < (${cursor.createdAt}, ${cursor.id})`;
    const [batch] = await ctx.db.$queryRaw<{ scanned: number; last_created_at: Date | null; last_id: string | null; finished: string[]; retrying: string[] }[]>`
      WITH batch AS (
        SELECT id, created_at, next_attempt_at IS NOT NULL AS retrying FROM deliveries
        WHERE subscription_id = ${window.subscriptionId} AND status = 'failed'
          AND created_at >= ${window.since} AND created_at < ${until} ${after} ${scoped}
        ORDER BY created_at DESC, id DESC
        LIMIT ${RECOVERY_BATCH_SIZE}
      ), resent AS (
        UPDATE deliveries d SET status = ${next.status}::delivery_status,
          next_attempt_at = now() + ${next.nextAttemptInMs} * interval '1 millisecond', updated_at = now()
        FROM batch
        WHERE d.id = batch.id AND d.status = 'failed' AND d.updated_at < ${startedAt}
          AND (d.leased_until IS NULL OR d.leased_until < now())
        RETURNING d.id, batch.retrying
      ), last AS (
        SELECT created_at, id FROM batch ORDER BY created_at ASC, id ASC LIMIT 1
      )
      SELECT (SELECT count(*) FROM batch)::int AS scanned, (SELECT created_at FROM last) AS last_created_at, (SELECT id FROM last) AS last_id,
             ARRAY(SELECT id FROM resent WHERE NOT retrying) AS finished, ARRAY(SELECT id FROM resent WHERE retrying) AS retrying`;
    if (!batch || batch.last_id === null || batch.last_created_at === null) break;
    const resent = batch.finished.length + batch.retrying.length;
    count += resent;
    if (resent > 0) yield { finished: batch.finished, retrying: batch.retrying };
    if (batch.scanned < RECOVERY_BATCH_SIZE) break;
    cursor = { createdAt: batch.last_created_at, id: batch.last_id };
  }
  return { count, until };
}
