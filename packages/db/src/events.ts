import { createHash } from "node:crypto";
import {
  CROCKFORD_ALPHABET,
  filterVariables,
  ID_BLOCK_SUFFIX_LENGTH,
  IdempotencyConflictError,
  INITIAL_STATE,
  isId,
  NotFoundError,
  newId,
  newIdBlock,
  OPERATIONAL_PREFIX,
} from "@webhooks/core";
import type { Prisma, PrismaClientOrTransaction } from "./client.ts";
import type { SqlClient } from "./sql.ts";

export interface EventRecord {
  id: string;
  type: string;
  /** The payload; null once erased (docs/api.md#erase-an-events-payload). */
  data: Record<string, unknown> | null;
  /** The tenant it was published for; null for none. */
  tenantId: string | null;
  createdAt: Date;
  /** When the payload was erased; null while it is kept. */
  payloadDeletedAt: Date | null;
}

export interface PublishContext {
  /** The pool, or a transaction's client when the events belong to a larger unit of work. */
  sql: SqlClient;
}

export interface PublishInput {
  type: string;
  data: Record<string, unknown>;
  idempotencyKey?: string | undefined;
  /** The event reaches only this tenant's subscriptions; without one, only untenanted ones. */
  tenantId?: string | null | undefined;
  /**
   * The revision of its type's catalog entry that `data` was checked against, 0 if the type was
   * not in the catalog; undefined for an event the catalog does not govern (the operational
   * ones). The statement writes the event only if that is still the type's revision, and
   * otherwise answers a CatalogChangedError for it (docs/api.md#event-types).
   */
  catalogRevision?: number | undefined;
  /** The publishing request's W3C traceparent, which its deliveries' attempts continue (docs/operations.md#tracing). */
  traceparent?: string | undefined;
}

/** The event's type changed in the catalog after the event was checked against it: check it again. */
export class CatalogChangedError extends Error {
  constructor(readonly type: string) {
    super(`The event type ${type} changed in the catalog while the event was being published`);
    this.name = "CatalogChangedError";
  }
}

export interface PublishResult {
  event: EventRecord;
  /** False when an Idempotency-Key matched an event published earlier. */
  created: boolean;
  /** How many deliveries the event got (none for a replay). */
  deliveryCount: number;
  /**
   * The deliveries created, when the batch created at most `returnLimit` of them; otherwise
   * empty, and the caller reads them in chunks after commit with `deliveryJobChunks`.
   */
  deliveryIds: string[];
  /**
   * The subscription of each delivery in `deliveryIds`, by delivery id, for the queue's jobs
   * (DeliveryJobRef); none for an ordered delivery.
   */
  subscriptionOf: Map<string, string>;
  /** Every delivery id of the event starts with this (see core's newIdBlock). */
  deliveryIdBlock: string;
}

/**
 * A delivery and its subscription, as the queue's job carries them. An ordered delivery
 * (docs/api.md#ordered-delivery) goes without its subscription: a job that names it may join the
 * subscription's line at the gate before its claim, and one behind others in its order must not,
 * since it would hold a turn there that it cannot take.
 */
export interface DeliveryJobRef {
  deliveryId: string;
  subscriptionId?: string;
}

/**
 * The id of the n-th delivery (from 0) of an event: the event's id block followed by n in
 * Crockford base32, 6 characters, so deliveries numbered in SQL sort like ids made by newId.
 */
const deliveryIdSql = (block: string, n: string) =>
  [
    block,
    ...Array.from(
      { length: ID_BLOCK_SUFFIX_LENGTH },
      (_, i) => `substr('${CROCKFORD_ALPHABET}', ((${n} >> ${5 * (ID_BLOCK_SUFFIX_LENGTH - 1 - i)}) & 31)::int + 1, 1)`,
    ),
  ].join(" || ");

/**
 * One statement publishes the whole batch: it inserts the events, finds the subscriptions that
 * want each one (matchesEventType's rules: the exact type, or "*" for any type but operational
 * ones; the same tenant, or none for none; and the payload filter, if any), and inserts one
 * delivery per pair, numbered in SQL. No subscription row travels to the API and back, however
 * many there are.
 *
 * Only active subscriptions get deliveries. Each delivery copies the url, the custom headers and
 * the endpoint credentials' id, so later updates cannot change them
 * (docs/api.md#updates-apply-to-the-next-delivery). It records the secret current now; attempts
 * are signed with the subscription's secrets at attempt time.
 *
 * A filter is the jsonpath form of the subscription's filter (core's payload-filter-jsonpath.ts),
 * evaluated here, in the statement's snapshot: each event is matched against the filter as it is
 * committed when the event is, on every API process alike. An event checked against a catalog
 * revision that is no longer its type's is not written (`stale`), and is answered as such.
 */
const PUBLISH_SQL = `
  WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[], $6::text[], $7::text[], $10::int[], $11::jsonb[], $12::text[])
      AS i(id, type, data, idempotency_key, request_hash, tenant_id, delivery_block, catalog_revision, filter_vars, traceparent)
  ), stale AS (
    SELECT i.id FROM input i LEFT JOIN event_types t ON t.name = i.type
    WHERE i.catalog_revision IS NOT NULL AND coalesce(t.revision, 0) <> i.catalog_revision
  ), event AS (
    -- In the order of their keys: two batches carrying some of the same keys (a client's
    -- retries) then wait for each other's rows in the same order, and never deadlock.
    INSERT INTO events (id, type, data, idempotency_key, request_hash, tenant_id, traceparent)
    SELECT id, type, data, idempotency_key, request_hash, tenant_id, traceparent FROM input
    WHERE id NOT IN (SELECT id FROM stale)
    ORDER BY idempotency_key
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, created_at
  ), candidate AS (
    -- One lookup in the events GIN index for the whole batch.
    SELECT id, url, secret_id, headers, credentials_id, events, tenant_id, filter_path, ordering FROM subscriptions
    WHERE active AND deleted_at IS NULL AND events && ($8::text[] || ARRAY['*'])
  ), target AS (
    SELECT i.id AS event_id, i.type, i.tenant_id, i.delivery_block, event.created_at,
           c.id AS subscription_id, c.url, c.secret_id, c.headers, c.credentials_id, c.ordering = 'fifo' AS ordered,
           row_number() OVER (PARTITION BY i.id ORDER BY c.id) - 1 AS n
    FROM event
    JOIN input i ON i.id = event.id
    JOIN candidate c ON c.tenant_id IS NOT DISTINCT FROM i.tenant_id
      AND (i.type = ANY (c.events) OR ('*' = ANY (c.events) AND NOT starts_with(i.type, '${OPERATIONAL_PREFIX}')))
      AND (c.filter_path IS NULL OR jsonb_path_match(i.data, c.filter_path, i.filter_vars, true))
  ), delivery AS (
    -- Core's INITIAL_STATE: queued, due at once (next_attempt_at is the creation time). Ordered
    -- with its subscription's ordering as it is now (docs/api.md#ordered-delivery).
    INSERT INTO deliveries (id, subscription_id, event_id, event_type, tenant_id, url, secret_id, headers, credentials_id, ordered, status, next_attempt_at, created_at, updated_at)
    SELECT ${deliveryIdSql("delivery_block", "n")}, subscription_id, event_id, type, tenant_id, url, secret_id, headers, credentials_id, ordered,
           '${INITIAL_STATE.status}', created_at, created_at, created_at
    FROM target
    RETURNING id, event_id, subscription_id, ordered
  ), returned AS (
    -- The deliveries go back to the caller only when they are few; a big fan-out is read in chunks.
    SELECT (SELECT count(*) FROM delivery) <= $9::int AS ok
  ), per_event AS (
    SELECT event_id, count(*)::int AS deliveries,
           array_agg(id ORDER BY id) FILTER (WHERE returned.ok) AS delivery_ids,
           array_agg(CASE WHEN NOT ordered THEN subscription_id END ORDER BY id) FILTER (WHERE returned.ok) AS subscription_ids
    FROM delivery, returned GROUP BY event_id
  )
  SELECT event.id, event.created_at AS "createdAt", coalesce(per_event.deliveries, 0) AS "deliveryCount",
         per_event.delivery_ids AS "deliveryIds", per_event.subscription_ids AS "subscriptionIds", false AS stale
  FROM event LEFT JOIN per_event ON per_event.event_id = event.id
  UNION ALL
  SELECT id, NULL, 0, NULL, NULL, true FROM stale`;

/**
 * Publishes events (docs/architecture.md#how-a-publish-flows). Each event and one `queued` delivery
 * per matching active subscription are written by one SQL statement, so either all of it is
 * committed or none. The caller enqueues the deliveries once that has committed: PostgreSQL is the
 * source of truth, and if Redis is unreachable the worker's reconciler enqueues them later.
 *
 * It takes a batch: the API gathers the publishes that arrive together and writes them with one
 * statement and one commit, which is what lets one API process accept thousands of events a
 * second. The result for each input is its PublishResult, or the error that applies to it alone
 * (an Idempotency-Key reused with another request, or a failure to read the event that won its
 * key); a rejection means nothing was written.
 *
 * `returnLimit`: the batch's deliveries come back in the results only if there are at most this
 * many (default: all); past it the caller reads them with `deliveryJobChunks`, so that a fan-out
 * to 10,000 subscriptions is never one 10,000-row structure in memory.
 */
export async function publishEvents(
  ctx: PublishContext,
  inputs: PublishInput[],
  options: { returnLimit?: number } = {},
): Promise<(PublishResult | Error)[]> {
  const results: (PublishResult | Error | undefined)[] = inputs.map(() => undefined);
  const hashes = inputs.map((input) => (input.idempotencyKey === undefined ? null : hashRequest(input)));

  // Retries carrying an Idempotency-Key get the event published the first time. (A failure
  // here fails the whole batch: nothing is written yet.)
  const keyed = inputs.flatMap((input, index) => (input.idempotencyKey === undefined ? [] : [index]));
  if (keyed.length > 0) {
    const earlier = await findIdempotentEvents(
      ctx.sql,
      keyed.map((index) => inputs[index]!.idempotencyKey!),
    );
    for (const index of keyed) {
      const found = earlier.get(inputs[index]!.idempotencyKey!);
      if (found) results[index] = replay(found, inputs[index]!.idempotencyKey!, hashes[index]!);
    }
  }

  const pending = inputs.flatMap((input, index) => (results[index] === undefined ? [{ input, index }] : []));
  if (pending.length === 0) return finish(results);

  const events = pending.map(({ input, index }) => ({
    index,
    input,
    id: newId("event"),
    block: newIdBlock("delivery"),
    hash: hashes[index] ?? null,
  }));
  const written = await ctx.sql.query<{
    id: string;
    createdAt: Date;
    deliveryCount: number;
    deliveryIds: string[] | null;
    subscriptionIds: (string | null)[] | null;
    stale: boolean;
  }>(PUBLISH_SQL, [
    events.map((e) => e.id),
    events.map((e) => e.input.type),
    events.map((e) => JSON.stringify(e.input.data)),
    events.map((e) => e.input.idempotencyKey ?? null),
    events.map((e) => e.hash),
    events.map((e) => e.input.tenantId ?? null),
    events.map((e) => e.block),
    [...new Set(events.map((e) => e.input.type))],
    options.returnLimit ?? 2_147_483_647,
    events.map((e) => e.input.catalogRevision ?? null),
    events.map((e) => JSON.stringify(filterVariables(e.input))),
    events.map((e) => e.input.traceparent ?? null),
  ]);

  const rows = new Map(written.map((row) => [row.id, row]));
  const conflicted: { index: number; key: string; hash: string }[] = [];
  for (const event of events) {
    const row = rows.get(event.id);
    if (row?.stale) {
      results[event.index] = new CatalogChangedError(event.input.type);
    } else if (row) {
      const deliveryIds = row.deliveryIds ?? [];
      const subscriptionIds = row.subscriptionIds ?? [];
      results[event.index] = {
        event: {
          id: event.id,
          type: event.input.type,
          data: event.input.data,
          tenantId: event.input.tenantId ?? null,
          createdAt: row.createdAt,
          payloadDeletedAt: null,
        },
        created: true,
        deliveryCount: row.deliveryCount,
        deliveryIds,
        subscriptionOf: new Map(
          deliveryIds.flatMap((id, i) => {
            const subscriptionId = subscriptionIds[i];
            return subscriptionId ? [[id, subscriptionId] as const] : [];
          }),
        ),
        deliveryIdBlock: event.block,
      };
    } else {
      // A concurrent request with the same Idempotency-Key won the insert.
      conflicted.push({ index: event.index, key: event.input.idempotencyKey ?? "", hash: event.hash ?? "" });
    }
  }
  if (conflicted.length > 0) {
    // After the commit: a failure here is the conflicted inputs' alone. The batch's other events
    // are committed, and must be answered as accepted, not with an error a client would retry.
    const winners = await findIdempotentEvents(
      ctx.sql,
      conflicted.map((c) => c.key),
    ).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
    for (const { index, key, hash } of conflicted) {
      if (winners instanceof Error) {
        results[index] = winners;
      } else {
        const winner = winners.get(key);
        results[index] = winner
          ? replay(winner, key, hash)
          : new Error("idempotent event vanished after a key conflict");
      }
    }
  }
  return finish(results);
}

function finish(results: (PublishResult | Error | undefined)[]): (PublishResult | Error)[] {
  return results.map((result) => {
    if (result === undefined) throw new Error("publishEvents left an input without a result");
    return result;
  });
}

/**
 * The deliveries of a published event, `size` at a time in id order, for enqueueing a big
 * fan-out after commit without holding all of it: each chunk is one walk of the primary key
 * over the event's id block.
 */
export async function* deliveryJobChunks(
  ctx: PublishContext,
  deliveryIdBlock: string,
  size: number,
): AsyncGenerator<DeliveryJobRef[]> {
  const last = deliveryIdBlock + "Z".repeat(ID_BLOCK_SUFFIX_LENGTH);
  let after = deliveryIdBlock;
  for (;;) {
    const rows = await ctx.sql.query<{ deliveryId: string; subscriptionId: string | null }>(
      `SELECT id AS "deliveryId", CASE WHEN NOT ordered THEN subscription_id END AS "subscriptionId" FROM deliveries
       WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3`,
      [after, last, size],
    );
    if (rows.length > 0)
      yield rows.map(({ deliveryId, subscriptionId }) =>
        subscriptionId === null ? { deliveryId } : { deliveryId, subscriptionId },
      );
    if (rows.length < size) return;
    after = rows[rows.length - 1]!.deliveryId;
  }
}

/**
 * An example event for one subscription alone (docs/api.md#send-a-test-event), whatever its
 * `events` and whether it is paused (not deleted): the event and its one delivery, snapshotting the
 * subscription as publishEvents does, written by one statement. Both carry the subscription's
 * tenant. The caller enqueues the delivery after commit.
 */
export async function publishTestEvent(
  ctx: PublishContext,
  input: { subscriptionId: string; type: string; data: Record<string, unknown> },
): Promise<{ event: EventRecord; deliveryId: string }> {
  const notFound = () => new NotFoundError(`No such subscription: ${input.subscriptionId}`, "subscription_id");
  if (!isId("subscription", input.subscriptionId)) throw notFound();
  const eventId = newId("event");
  const deliveryId = newId("delivery");
  const [written] = await ctx.sql.query<{ createdAt: Date; tenantId: string | null }>(
    `WITH target AS (
       SELECT id, url, secret_id, headers, credentials_id, tenant_id FROM subscriptions WHERE id = $1 AND deleted_at IS NULL
     ), event AS (
       INSERT INTO events (id, type, data, tenant_id) SELECT $2, $3, $4::jsonb, tenant_id FROM target
       RETURNING id, created_at, tenant_id
     ), delivery AS (
       INSERT INTO deliveries (id, subscription_id, event_id, event_type, tenant_id, url, secret_id, headers, credentials_id, status, next_attempt_at, test, created_at, updated_at)
       SELECT $5, target.id, event.id, $3, target.tenant_id, target.url, target.secret_id, target.headers, target.credentials_id, '${INITIAL_STATE.status}', event.created_at, true, event.created_at, event.created_at
       FROM target, event
     )
     SELECT created_at AS "createdAt", tenant_id AS "tenantId" FROM event`,
    [input.subscriptionId, eventId, input.type, JSON.stringify(input.data), deliveryId],
  );
  if (!written) throw notFound();
  return {
    event: {
      id: eventId,
      type: input.type,
      data: input.data,
      tenantId: written.tenantId,
      createdAt: written.createdAt,
      payloadDeletedAt: null,
    },
    deliveryId,
  };
}

interface StoredEvent {
  id: string;
  type: string;
  data: Prisma.JsonValue;
  tenantId: string | null;
  createdAt: Date;
  payloadDeletedAt: Date | null;
  requestHash: string | null;
}

/** Whether an event was published with this Idempotency-Key (and is still kept). */
export async function hasIdempotentEvent(ctx: PublishContext, key: string): Promise<boolean> {
  const rows = await ctx.sql.query<{ found: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM events WHERE idempotency_key = $1) AS found",
    [key],
  );
  return rows[0]?.found ?? false;
}

async function findIdempotentEvents(sql: SqlClient, keys: string[]): Promise<Map<string, StoredEvent>> {
  const rows = await sql.query<StoredEvent & { idempotencyKey: string }>(
    `SELECT id, type, data, tenant_id AS "tenantId", created_at AS "createdAt", payload_deleted_at AS "payloadDeletedAt", request_hash AS "requestHash", idempotency_key AS "idempotencyKey"
     FROM events WHERE idempotency_key = ANY($1::text[])`,
    [keys],
  );
  return new Map(rows.map((row) => [row.idempotencyKey, row]));
}

/** The earlier event, if the request is the same; a conflict if the key now comes with another. */
function replay(earlier: StoredEvent, key: string, requestHash: string): PublishResult | IdempotencyConflictError {
  if (earlier.requestHash !== requestHash) {
    return new IdempotencyConflictError(`Idempotency-Key ${key} was already used with a different request`);
  }
  return {
    event: toEventRecord(earlier),
    created: false,
    deliveryCount: 0,
    deliveryIds: [],
    subscriptionOf: new Map(),
    deliveryIdBlock: "",
  };
}

export async function getEvent(ctx: { db: PrismaClientOrTransaction }, id: string): Promise<EventRecord> {
  const event = isId("event", id) ? await ctx.db.event.findUnique({ where: { id } }) : null;
  if (!event) throw new NotFoundError(`No such event: ${id}`, "event_id");
  return toEventRecord(event);
}

function toEventRecord(event: {
  id: string;
  type: string;
  data: Prisma.JsonValue;
  tenantId: string | null;
  createdAt: Date;
  payloadDeletedAt: Date | null;
}): EventRecord {
  return {
    id: event.id,
    type: event.type,
    data: event.data as Record<string, unknown> | null,
    tenantId: event.tenantId,
    createdAt: event.createdAt,
    payloadDeletedAt: event.payloadDeletedAt,
  };
}

/**
 * Two requests are the same when their type, data and tenant are equal, whatever the key order.
 * An untenanted request hashes as it did before tenants existed, so keys stored then still match.
 */
function hashRequest(input: PublishInput): string {
  const { type, data } = input;
  const request = input.tenantId == null ? { type, data } : { type, data, tenant_id: input.tenantId };
  return createHash("sha256").update(canonicalJson(request)).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
