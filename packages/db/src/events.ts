import { createHash } from "node:crypto";
import { IdempotencyConflictError, isId, matchesEventType, newId, NotFoundError } from "@webhooks/core";
import type { Prisma, PrismaClientOrTransaction } from "./client.ts";
import type { SqlClient } from "./sql.ts";

export interface EventRecord {
  id: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

export interface PublishContext {
  /** The pool, or a transaction's client when the events belong to a larger unit of work. */
  sql: SqlClient;
}

export interface PublishInput {
  type: string;
  data: Record<string, unknown>;
  idempotencyKey?: string | undefined;
}

export interface PublishResult {
  event: EventRecord;
  /** False when an Idempotency-Key matched an event published earlier. */
  created: boolean;
  deliveryIds: string[];
  /** The subscription of each delivery created, by delivery id (for the queue's jobs). */
  subscriptionOf: Map<string, string>;
}

interface Target {
  id: string;
  url: string;
  secret_id: string;
  headers: Record<string, string>;
  events: string[];
}

/**
 * Publishes events (contract §7). Each event and one `queued` delivery per matching active
 * subscription are written by one SQL statement, so either all of it is committed or none. The
 * caller enqueues the returned deliveries once that has committed: PostgreSQL is the source of
 * truth, and if Redis is unreachable the worker's reconciler enqueues them later.
 *
 * It takes a batch: the API gathers the publishes that arrive together and writes them with one
 * lookup, one insert and one commit, which is what lets one API process accept hundreds of events
 * a second. The result for each input is its PublishResult, or the error that applies to it alone
 * (an Idempotency-Key reused with another request).
 */
export async function publishEvents(ctx: PublishContext, inputs: PublishInput[]): Promise<(PublishResult | IdempotencyConflictError)[]> {
  const results: (PublishResult | IdempotencyConflictError | undefined)[] = inputs.map(() => undefined);
  const hashes = inputs.map((input) => (input.idempotencyKey === undefined ? null : hashRequest(input.type, input.data)));

  // Retries carrying an Idempotency-Key get the event published the first time.
  const keyed = inputs.flatMap((input, index) => (input.idempotencyKey === undefined ? [] : [index]));
  if (keyed.length > 0) {
    const earlier = await findIdempotentEvents(ctx.sql, keyed.map((index) => inputs[index]!.idempotencyKey!));
    for (const index of keyed) {
      const found = earlier.get(inputs[index]!.idempotencyKey!);
      if (found) results[index] = replay(found, inputs[index]!.idempotencyKey!, hashes[index]!);
    }
  }

  const pending = inputs.flatMap((input, index) => (results[index] === undefined ? [{ input, index }] : []));
  if (pending.length > 0) {
    // Spec §3.2: only active subscriptions get deliveries. Each delivery copies the url and the
    // custom headers, so later updates cannot change them (contract §8, §12). It records the
    // secret current now; attempts are signed with the subscription's secrets at attempt time.
    const types = [...new Set(pending.map(({ input }) => input.type))];
    const targets = await ctx.sql.query<Target>(
      `SELECT id, url, secret_id, headers, events FROM subscriptions
       WHERE active AND deleted_at IS NULL AND events && ($1::text[] || ARRAY['*'])
       ORDER BY id`,
      [types],
    );

    const events = pending.map(({ input, index }) => ({
      index,
      id: newId("event"),
      input,
      hash: hashes[index] ?? null,
      deliveries: targets.filter((target) => matchesEventType(target.events, input.type)).map((target) => ({ id: newId("delivery"), target })),
    }));
    const deliveries = events.flatMap((event) => event.deliveries.map((delivery) => ({ ...delivery, eventId: event.id, type: event.input.type })));

    const written = await ctx.sql.query<{ id: string; created_at: Date }>(
      `WITH event AS (
         INSERT INTO events (id, type, data, idempotency_key, request_hash)
         SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[])
         ON CONFLICT (idempotency_key) DO NOTHING
         RETURNING id, created_at
       ), delivery AS (
         INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, headers, status, next_attempt_at, created_at, updated_at)
         SELECT d.id, d.subscription_id, event.id, d.event_type, d.url, d.secret_id, d.headers, 'queued', event.created_at, event.created_at, event.created_at
         FROM unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::jsonb[])
           AS d(id, event_id, subscription_id, event_type, url, secret_id, headers)
         JOIN event ON event.id = d.event_id
       )
       SELECT id, created_at FROM event`,
      [
        events.map((e) => e.id),
        events.map((e) => e.input.type),
        events.map((e) => JSON.stringify(e.input.data)),
        events.map((e) => e.input.idempotencyKey ?? null),
        events.map((e) => e.hash),
        deliveries.map((d) => d.id),
        deliveries.map((d) => d.eventId),
        deliveries.map((d) => d.target.id),
        deliveries.map((d) => d.type),
        deliveries.map((d) => d.target.url),
        deliveries.map((d) => d.target.secret_id),
        deliveries.map((d) => JSON.stringify(d.target.headers)),
      ],
    );

    const createdAt = new Map(written.map((row) => [row.id, row.created_at]));
    const conflicted: { index: number; key: string; hash: string }[] = [];
    for (const event of events) {
      const at = createdAt.get(event.id);
      if (at) {
        results[event.index] = {
          event: { id: event.id, type: event.input.type, data: event.input.data, createdAt: at },
          created: true,
          deliveryIds: event.deliveries.map((delivery) => delivery.id),
          subscriptionOf: new Map(event.deliveries.map((delivery) => [delivery.id, delivery.target.id])),
        };
      } else {
        // A concurrent request with the same Idempotency-Key won the insert.
        conflicted.push({ index: event.index, key: event.input.idempotencyKey ?? "", hash: event.hash ?? "" });
      }
    }
    if (conflicted.length > 0) {
      const winners = await findIdempotentEvents(ctx.sql, conflicted.map((c) => c.key));
      for (const { index, key, hash } of conflicted) {
        const winner = winners.get(key);
        if (!winner) throw new Error("idempotent event vanished after a key conflict");
        results[index] = replay(winner, key, hash);
      }
    }
  }
  return results.map((result) => {
    if (result === undefined) throw new Error("publishEvents left an input without a result");
    return result;
  });
}

/**
 * Contract §12: an example event for one subscription alone, whatever its `events` and whether
 * it is paused (not deleted): the event and its one delivery, snapshotting the subscription as
 * publishEvents does, written by one statement. The caller enqueues the delivery after commit.
 */
export async function publishTestEvent(
  ctx: PublishContext,
  input: { subscriptionId: string; type: string; data: Record<string, unknown> },
): Promise<{ event: EventRecord; deliveryId: string }> {
  const notFound = () => new NotFoundError(`No such subscription: ${input.subscriptionId}`, "subscription_id");
  if (!isId("subscription", input.subscriptionId)) throw notFound();
  const eventId = newId("event");
  const deliveryId = newId("delivery");
  const [written] = await ctx.sql.query<{ created_at: Date }>(
    `WITH target AS (
       SELECT id, url, secret_id, headers FROM subscriptions WHERE id = $1 AND deleted_at IS NULL
     ), event AS (
       INSERT INTO events (id, type, data) SELECT $2, $3, $4::jsonb FROM target
       RETURNING id, created_at
     ), delivery AS (
       INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, headers, status, next_attempt_at, created_at, updated_at)
       SELECT $5, target.id, event.id, $3, target.url, target.secret_id, target.headers, 'queued', event.created_at, event.created_at, event.created_at
       FROM target, event
     )
     SELECT created_at FROM event`,
    [input.subscriptionId, eventId, input.type, JSON.stringify(input.data), deliveryId],
  );
  if (!written) throw notFound();
  return { event: { id: eventId, type: input.type, data: input.data, createdAt: written.created_at }, deliveryId };
}

interface StoredEvent {
  id: string;
  type: string;
  data: Prisma.JsonValue;
  createdAt: Date;
  requestHash: string | null;
}

async function findIdempotentEvents(sql: SqlClient, keys: string[]): Promise<Map<string, StoredEvent>> {
  const rows = await sql.query<StoredEvent & { idempotencyKey: string }>(
    `SELECT id, type, data, created_at AS "createdAt", request_hash AS "requestHash", idempotency_key AS "idempotencyKey"
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
  return { event: toEventRecord(earlier), created: false, deliveryIds: [], subscriptionOf: new Map() };
}

export async function getEvent(ctx: { db: PrismaClientOrTransaction }, id: string): Promise<EventRecord> {
  const event = isId("event", id) ? await ctx.db.event.findUnique({ where: { id } }) : null;
  if (!event) throw new NotFoundError(`No such event: ${id}`, "event_id");
  return toEventRecord(event);
}

function toEventRecord(event: { id: string; type: string; data: Prisma.JsonValue; createdAt: Date }): EventRecord {
  return { id: event.id, type: event.type, data: event.data as Record<string, unknown>, createdAt: event.createdAt };
}

/** Two requests are the same when their type and data are equal, whatever the key order. */
function hashRequest(type: string, data: unknown): string {
  return createHash("sha256").update(canonicalJson({ type, data })).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
