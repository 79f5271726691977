import { newId, type DeliveryStatus } from "@webhooks/core";
import type { PrismaClientOrTransaction } from "./client.ts";

/**
 * The worker's side of a delivery: claim it, make one attempt, record the outcome.
 *
 * The claim is a lease on the row. The queue already hands a job to one worker at a time, but a
 * worker that loses Redis or stalls past its job lock can see its job handed to another worker
 * while its own request is still in flight; the lease makes that second worker wait instead of
 * sending the same delivery twice at once. The lease outlives the attempt's timeout.
 */

/** Wake-ups a little early (clock skew between Redis, worker and database) still count as due. */
const DUE_TOLERANCE_MS = 500;

export interface ClaimedDelivery {
  deliveryId: string;
  /** The snapshot taken at creation (contract §8). */
  url: string;
  secretId: string;
  secretCiphertext: Uint8Array;
  eventId: string;
  eventType: string;
  /** The event's data as JSON text, sent as it is stored. */
  eventDataJson: string;
  eventCreatedAt: Date;
  /** Attempts made before this one. */
  attemptsMade: number;
}

export type ClaimResult =
  | { claimed: true; delivery: ClaimedDelivery }
  | { claimed: false; reason: "missing" | "finished" }
  | { claimed: false; reason: "not_due" | "leased"; retryInMs: number };

export async function claimDelivery(
  ctx: { db: PrismaClientOrTransaction },
  input: { deliveryId: string; leaseToken: string; leaseMs: number },
): Promise<ClaimResult> {
  const [row] = await ctx.db.$queryRaw<
    {
      url: string;
      secret_id: string;
      ciphertext: Uint8Array;
      event_id: string;
      type: string;
      data: string;
      event_created_at: Date;
      attempts: number;
    }[]
  >`
    UPDATE deliveries d
    SET lease_token = ${input.leaseToken}, leased_until = now() + ${input.leaseMs} * interval '1 millisecond'
    FROM events e, signing_secrets s
    WHERE d.id = ${input.deliveryId} AND e.id = d.event_id AND s.id = d.secret_id
      AND d.next_attempt_at <= now() + ${DUE_TOLERANCE_MS} * interval '1 millisecond'
      AND (d.leased_until IS NULL OR d.leased_until < now())
    RETURNING d.url, d.secret_id, s.ciphertext, d.event_id, e.type, e.data::text AS data,
              e.created_at AS event_created_at, d.attempts`;
  if (row) {
    return {
      claimed: true,
      delivery: {
        deliveryId: input.deliveryId,
        url: row.url,
        secretId: row.secret_id,
        secretCiphertext: row.ciphertext,
        eventId: row.event_id,
        eventType: row.type,
        eventDataJson: row.data,
        eventCreatedAt: row.event_created_at,
        attemptsMade: row.attempts,
      },
    };
  }

  // Not claimable: find out why, measuring time on the database's clock.
  const [state] = await ctx.db.$queryRaw<{ due_in_ms: number | null; leased_for_ms: number | null }[]>`
    SELECT (extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS due_in_ms,
           (extract(epoch FROM leased_until - now()) * 1000)::float8 AS leased_for_ms
    FROM deliveries WHERE id = ${input.deliveryId}`;
  if (!state) return { claimed: false, reason: "missing" };
  if (state.due_in_ms === null) return { claimed: false, reason: "finished" };
  if (state.leased_for_ms !== null && state.leased_for_ms > 0) {
    return { claimed: false, reason: "leased", retryInMs: Math.ceil(state.leased_for_ms) };
  }
  return { claimed: false, reason: "not_due", retryInMs: Math.max(0, Math.ceil(state.due_in_ms)) };
}

export interface AttemptOutcome {
  startedAt: Date;
  durationMs: number;
  responseCode: number | null;
  responseBody: string | null;
  error: string | null;
  /** The delivery's new state. */
  status: Exclude<DeliveryStatus, "queued">;
  /** Wait before the next attempt, or null when nothing more is planned. */
  retryInMs: number | null;
}

/**
 * Writes the attempt and the delivery's new state in one statement, so they commit together.
 * Only the holder of the lease can record: if the lease expired and another worker took the
 * delivery over, this writes nothing and returns false.
 */
export async function recordAttempt(
  ctx: { db: PrismaClientOrTransaction },
  input: { deliveryId: string; leaseToken: string; outcome: AttemptOutcome },
): Promise<boolean> {
  const o = input.outcome;
  const [row] = await ctx.db.$queryRaw<{ attempts: number }[]>`
    WITH attempt AS (
      INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at, duration_ms, response_code, response_body, error)
      SELECT ${newId("attempt")}, d.id, d.attempts + 1, d.url, ${o.startedAt}, ${o.durationMs}, ${o.responseCode}, ${o.responseBody}, ${o.error}
      FROM deliveries d WHERE d.id = ${input.deliveryId} AND d.lease_token = ${input.leaseToken}
    )
    UPDATE deliveries SET
      status = ${o.status}::delivery_status,
      attempts = attempts + 1,
      response_code = ${o.responseCode},
      next_attempt_at = CASE WHEN ${o.retryInMs}::int IS NULL THEN NULL ELSE now() + ${o.retryInMs}::int * interval '1 millisecond' END,
      lease_token = NULL,
      leased_until = NULL,
      updated_at = now()
    WHERE id = ${input.deliveryId} AND lease_token = ${input.leaseToken}
    RETURNING attempts`;
  return row !== undefined;
}

/** Gives the lease back without recording an attempt, e.g. when a worker shuts down mid-claim. */
export async function releaseLease(ctx: { db: PrismaClientOrTransaction }, input: { deliveryId: string; leaseToken: string }): Promise<void> {
  await ctx.db.$executeRaw`
    UPDATE deliveries SET lease_token = NULL, leased_until = NULL
    WHERE id = ${input.deliveryId} AND lease_token = ${input.leaseToken}`;
}
