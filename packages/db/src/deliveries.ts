/**
 * The delivery log, read-only: list and get deliveries, and list a delivery's attempts
 * (docs/api.md#list-deliveries). Writes to `deliveries` are in events.ts (created),
 * delivery-leases.ts (attempted), delivery-resends.ts (resent) and retention.ts (deleted); see
 * delivery-leases.ts.
 */
import {
  type DeliveryStatus,
  type EndpointAuth,
  isId,
  NotFoundError,
  openCredentials,
  type SecretBox,
  type SignatureScheme,
} from "@webhooks/core";
import { Prisma } from "./client.ts";
import { fetchPage, type Page, type PageQuery, type PageRequest } from "./paging.ts";
import { type ScopedContext, type ScopedListContext, scopeConditions, type TenantScope } from "./tenant-scope.ts";

export interface DeliveryRecord {
  id: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  responseCode: number | null;
  nextRetryAt: Date | null;
  /** The event's tenant, which is its subscription's, or null. */
  tenantId: string | null;
  /** "payload_deleted" when it ended because its event's payload was erased; null otherwise. */
  failureReason: string | null;
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
  /** Inclusive lower bound on created_at. */
  since?: Date | undefined;
  /** Exclusive upper bound on created_at. */
  until?: Date | undefined;
  /** The last response's status: an exact code, or a class (5 for 5xx). */
  responseCode?: ResponseCodeFilter | undefined;
  /** Only this tenant's deliveries; ANDed with the caller's scope. */
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
  CASE WHEN status = 'failed' THEN next_attempt_at END AS "nextRetryAt", tenant_id AS "tenantId",
  failure_reason AS "failureReason", created_at AS "createdAt"`;

/** The delivery log, newest first (docs/api.md#list-deliveries). */
export async function listDeliveries(
  ctx: ScopedListContext,
  filters: DeliveryFilters,
  page: PageRequest,
): Promise<Page<DeliveryRecord>> {
  return fetchPage<DeliveryRecord>(ctx.sql, deliveryListQuery(ctx.scope, filters), page);
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
    for (const tenant of tenants)
      where.push(Prisma.sql`EXISTS (SELECT 1 FROM subscriptions WHERE id = ${filters.subscriptionId} AND ${tenant})`);
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
    where.push(
      "code" in responseCode
        ? Prisma.sql`response_code = ${responseCode.code}`
        : responseClassPredicates[responseCode.class],
    );
  }
  return {
    table: "deliveries",
    timeColumn: "created_at",
    columns: deliveryColumns,
    filters: where,
    resource: "delivery",
    cursorScope: scopeConditions(scope),
  };
}

export async function getDelivery(ctx: ScopedContext, id: string): Promise<DeliveryRecord> {
  if (!isId("delivery", id)) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  const where = Prisma.join([Prisma.sql`id = ${id}`, ...scopeConditions(ctx.scope)], " AND ");
  const [delivery] = await ctx.db.$queryRaw<DeliveryRecord[]>`SELECT ${deliveryColumns} FROM deliveries WHERE ${where}`;
  if (!delivery) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  return delivery;
}

/**
 * What every attempt of a delivery sends besides its own time and signature: the delivery's
 * snapshot of its event, of the subscription's custom headers and of its endpoint auth
 * (docs/api.md#updates-apply-to-the-next-delivery), and the subscription's signature scheme,
 * which never changes.
 */
export interface DeliveryRequest {
  eventId: string;
  headers: Record<string, string>;
  signatureScheme: SignatureScheme;
  /** The type of the auth in the delivery's sealed credentials; null for none. */
  authType: EndpointAuth["type"] | null;
}

/** A page of a delivery's attempt log, with the request they sent. */
export interface AttemptLog extends Page<AttemptRecord> {
  request: DeliveryRequest;
}

/** A delivery's attempt log, newest first (docs/api.md#list-a-deliverys-attempts). */
export async function listAttempts(
  ctx: ScopedContext & ScopedListContext & { secretBox: SecretBox },
  deliveryId: string,
  page: PageRequest,
): Promise<AttemptLog> {
  const request = await deliveryRequest(ctx, deliveryId);
  const attempts = await fetchPage<AttemptRecord>(
    ctx.sql,
    {
      // The attempts that ended and the one in flight (the view is in prisma/migrations).
      table: "delivery_attempt_log",
      timeColumn: "started_at",
      columns: Prisma.sql`
        id, delivery_id AS "deliveryId", number, url, started_at AS "startedAt", duration_ms AS "durationMs",
        response_code AS "responseCode", response_body AS "responseBody", error`,
      filters: [Prisma.sql`delivery_id = ${deliveryId}`],
      resource: "attempt",
      // A cursor must be one of this delivery's attempts. The condition also keeps the cursor's
      // lookup a lookup: the view's in-flight branch has no index on the attempt id, but finds
      // the delivery by its primary key. Attempts have no tenant column: an attempt is in scope
      // when its delivery is, and deliveryRequest above checked that.
      cursorScope: [Prisma.sql`delivery_id = ${deliveryId}`],
    },
    page,
  );
  return { ...attempts, request };
}

async function deliveryRequest(ctx: ScopedContext & { secretBox: SecretBox }, id: string): Promise<DeliveryRequest> {
  if (!isId("delivery", id)) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  const where = Prisma.join(
    [Prisma.sql`d.id = ${id}`, ...scopeConditions(ctx.scope, Prisma.raw("d.tenant_id"))],
    " AND ",
  );
  const [row] = await ctx.db.$queryRaw<
    {
      eventId: string;
      headers: Record<string, string>;
      signatureScheme: SignatureScheme | null;
      sealed: Uint8Array | null;
    }[]
  >`
    SELECT d.event_id AS "eventId", d.headers, s.signature_scheme AS "signatureScheme", c.ciphertext AS sealed
    FROM deliveries d
    LEFT JOIN subscriptions s ON s.id = d.subscription_id
    LEFT JOIN endpoint_credentials c ON c.id = d.credentials_id
    WHERE ${where}`;
  if (!row) throw new NotFoundError(`No such delivery: ${id}`, "delivery_id");
  return {
    eventId: row.eventId,
    headers: row.headers,
    signatureScheme: row.signatureScheme ?? "hmac-sha256",
    authType: row.sealed ? authTypeOf(ctx.secretBox, row.sealed) : null,
  };
}

/**
 * Which Authorization header the delivery's credentials add: their auth's type, and nothing of
 * the secret, which goes no further than this function. Credentials this key cannot open were
 * never sent either: the worker fails such an attempt before it sends anything.
 */
function authTypeOf(box: SecretBox, sealed: Uint8Array): EndpointAuth["type"] | null {
  try {
    return openCredentials(box, sealed).auth?.type ?? null;
  } catch {
    return null;
  }
}
