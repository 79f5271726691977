import { isId, nextState, NotFoundError, stateOf, type DeliveryStatus } from "@webhooks/core";
import { Prisma, type PrismaClientOrTransaction } from "./client.ts";
import { fetchPage, type Page, type PageRequest } from "./paging.ts";

export interface DeliveryRecord {
  id: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  responseCode: number | null;
  nextRetryAt: Date | null;
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
}

// next_attempt_at is also set while a delivery is queued; only a failed delivery has a retry.
const deliveryColumns = Prisma.sql`
  id, subscription_id AS "subscriptionId", event_id AS "eventId", event_type AS "eventType",
  status::text AS status, attempts, response_code AS "responseCode",
  CASE WHEN status = 'failed' THEN next_attempt_at END AS "nextRetryAt", created_at AS "createdAt"`;

/** The delivery log, newest first (spec §4.1, contract §4). */
export async function listDeliveries(
  ctx: { db: PrismaClientOrTransaction },
  filters: DeliveryFilters,
  page: PageRequest,
): Promise<Page<DeliveryRecord>> {
  const where: Prisma.Sql[] = [];
  if (filters.subscriptionId !== undefined) where.push(Prisma.sql`subscription_id = ${filters.subscriptionId}`);
  if (filters.status !== undefined) where.push(Prisma.sql`status = ${filters.status}::delivery_status`);
  if (filters.eventType !== undefined) where.push(Prisma.sql`event_type = ${filters.eventType}`);
  if (filters.since !== undefined) where.push(Prisma.sql`created_at >= ${filters.since}`);
  if (filters.until !== undefined) where.push(Prisma.sql`created_at < ${filters.until}`);
  return fetchPage<DeliveryRecord>(
    ctx.db,
    { table: "deliveries", timeColumn: "created_at", columns: deliveryColumns, filters: where, resource: "delivery" },
    page,
  );
}

export async function getDelivery(ctx: { db: PrismaClientOrTransaction }, id: string): Promise<DeliveryRecord> {
  if (!isId("delivery", id)) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  const [delivery] = await ctx.db.$queryRaw<DeliveryRecord[]>`SELECT ${deliveryColumns} FROM deliveries WHERE id = ${id}`;
  if (!delivery) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  return delivery;
}

/** A delivery's attempt log (contract §5), newest first. */
export async function listAttempts(
  ctx: { db: PrismaClientOrTransaction },
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
export async function resendDelivery(ctx: { db: PrismaClientOrTransaction }, id: string): Promise<DeliveryRecord> {
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
