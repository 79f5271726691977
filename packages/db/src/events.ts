import { createHash } from "node:crypto";
import { IdempotencyConflictError, isId, newId, NotFoundError } from "@webhooks/core";
import { Prisma, type PrismaClientOrTransaction } from "./client.ts";

export interface EventRecord {
  id: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/** Hands committed deliveries to the queue. Both operations are idempotent. */
export interface DeliveryEnqueuer {
  /** Enqueues a job for each delivery that has none. */
  enqueue(deliveryIds: string[]): Promise<void>;
  /** Makes the delivery's job run now: promotes a delayed job, or enqueues one if it has none. */
  bringForward(deliveryId: string): Promise<void>;
}

export interface PublishContext {
  db: PrismaClientOrTransaction;
  queue: DeliveryEnqueuer;
  logger: { warn(details: object, message: string): void };
}

export interface PublishResult {
  event: EventRecord;
  /** False when an Idempotency-Key matched an event published earlier. */
  created: boolean;
  deliveryIds: string[];
}

/**
 * Publishes an event (contract §7): the event and one `queued` delivery per matching active
 * subscription are written by one SQL statement, so either all of it is committed or none;
 * the deliveries' jobs are enqueued after that. PostgreSQL is the source of truth: if Redis is
 * unreachable the event is still accepted, and the worker's reconciler enqueues it later.
 */
export async function publishEvent(
  ctx: PublishContext,
  input: { type: string; data: Record<string, unknown>; idempotencyKey?: string | undefined },
): Promise<PublishResult> {
  const requestHash = input.idempotencyKey === undefined ? null : hashRequest(input.type, input.data);
  if (input.idempotencyKey !== undefined && requestHash !== null) {
    const earlier = await findIdempotentEvent(ctx.db, input.idempotencyKey, requestHash);
    if (earlier) return { event: earlier, created: false, deliveryIds: [] };
  }

  // Spec §3.2: only active subscriptions get deliveries. Each delivery copies the url and the
  // secret it will be signed with, so later updates cannot change it (contract §8).
  const targets = await ctx.db.$queryRaw<{ id: string; url: string; secret_id: string }[]>`
    SELECT id, url, secret_id FROM subscriptions
    WHERE active AND deleted_at IS NULL AND events && ARRAY[${input.type}, '*']::text[]
    ORDER BY id`;

  const eventId = newId("event");
  const deliveryIds = targets.map(() => newId("delivery"));
  const [written] = await ctx.db.$queryRaw<{ created_at: Date | null; deliveries: number }[]>`
    WITH event AS (
      INSERT INTO events (id, type, data, idempotency_key, request_hash)
      VALUES (${eventId}, ${input.type}, ${JSON.stringify(input.data)}::jsonb, ${input.idempotencyKey ?? null}, ${requestHash})
      ON CONFLICT (idempotency_key) DO NOTHING
      RETURNING id, created_at
    ), delivery AS (
      INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, next_attempt_at)
      SELECT target.id, target.subscription_id, event.id, ${input.type}, target.url, target.secret_id, 'queued', event.created_at
      FROM event, unnest(
        ${deliveryIds}::text[], ${targets.map((t) => t.id)}::text[],
        ${targets.map((t) => t.url)}::text[], ${targets.map((t) => t.secret_id)}::text[]
      ) AS target(id, subscription_id, url, secret_id)
      RETURNING id
    )
    SELECT (SELECT created_at FROM event) AS created_at, (SELECT count(*) FROM delivery)::int AS deliveries`;

  if (!written?.created_at) {
    // A concurrent request with the same Idempotency-Key won the insert.
    const earlier = await findIdempotentEvent(ctx.db, input.idempotencyKey ?? "", requestHash ?? "");
    if (!earlier) throw new Error("idempotent event vanished after a key conflict");
    return { event: earlier, created: false, deliveryIds: [] };
  }

  try {
    await ctx.queue.enqueue(deliveryIds);
  } catch (error) {
    ctx.logger.warn({ err: error, eventId, deliveries: deliveryIds.length }, "could not enqueue deliveries; the reconciler will");
  }
  return {
    event: { id: eventId, type: input.type, data: input.data, createdAt: written.created_at },
    created: true,
    deliveryIds,
  };
}

async function findIdempotentEvent(db: PrismaClientOrTransaction, key: string, requestHash: string): Promise<EventRecord | undefined> {
  const event = await db.event.findUnique({ where: { idempotencyKey: key } });
  if (!event) return undefined;
  if (event.requestHash !== requestHash) {
    throw new IdempotencyConflictError(`Idempotency-Key ${key} was already used with a different request`);
  }
  return toEventRecord(event);
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
