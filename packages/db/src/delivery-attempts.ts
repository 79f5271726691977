import { newId, type DeliveryStatus } from "@webhooks/core";
import type { SqlClient } from "./sql.ts";

/**
 * The worker's side of a delivery: claim it, make one attempt, record the outcome.
 *
 * The claim is a lease on the row. The queue already hands a job to one worker at a time, but a
 * worker that loses Redis or stalls past its job lock can see its job handed to another worker
 * while its own request is still in flight; the lease makes that second worker wait instead of
 * sending the same delivery twice at once. The lease outlives the attempt's timeout.
 *
 * Both verbs take many deliveries at once: a busy worker batches the claims, and the records,
 * of the jobs it runs concurrently into one statement each, saving round trips and commits.
 */

/** Wake-ups a little early (clock skew between Redis, worker and database) still count as due. */
const DUE_TOLERANCE_MS = 500;

export interface ClaimedDelivery {
  deliveryId: string;
  leaseToken: string;
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

/**
 * Takes a lease on each delivery that is due and not leased, and returns the snapshot of those
 * it claimed, by delivery id. Deliveries missing from the result were not claimable; see
 * `whyNotClaimed`.
 *
 * The claim commits asynchronously (set_config(..., true) lasts until the end of the statement's
 * own transaction), so the webhook goes out without waiting for the WAL to reach the disk. A
 * lease lost in a database crash is harmless: recording then fails its lease check, and the
 * delivery is attempted again, as at-least-once delivery allows.
 */
export async function claimDeliveries(
  ctx: { sql: SqlClient },
  input: { claims: { deliveryId: string; leaseToken: string }[]; leaseMs: number },
): Promise<Map<string, ClaimedDelivery>> {
  const rows = await ctx.sql.query<{
    id: string;
    lease_token: string;
    url: string;
    secret_id: string;
    ciphertext: Uint8Array;
    event_id: string;
    type: string;
    data: string;
    event_created_at: Date;
    attempts: number;
  }>(
    `UPDATE deliveries d
     SET lease_token = c.lease_token, leased_until = now() + $3::int * interval '1 millisecond'
     FROM unnest($1::text[], $2::text[]) AS c(id, lease_token), events e, signing_secrets s,
          (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
     WHERE d.id = c.id AND e.id = d.event_id AND s.id = d.secret_id
       AND d.next_attempt_at <= now() + $4::int * interval '1 millisecond'
       AND (d.leased_until IS NULL OR d.leased_until < now())
     RETURNING d.id, d.lease_token, d.url, d.secret_id, s.ciphertext, d.event_id, e.type, e.data::text AS data,
               e.created_at AS event_created_at, d.attempts`,
    [input.claims.map((c) => c.deliveryId), input.claims.map((c) => c.leaseToken), input.leaseMs, DUE_TOLERANCE_MS],
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        deliveryId: row.id,
        leaseToken: row.lease_token,
        url: row.url,
        secretId: row.secret_id,
        secretCiphertext: row.ciphertext,
        eventId: row.event_id,
        eventType: row.type,
        eventDataJson: row.data,
        eventCreatedAt: row.event_created_at,
        attemptsMade: row.attempts,
      },
    ]),
  );
}

export type NotClaimed =
  | { reason: "missing" | "finished" }
  | { reason: "not_due" | "leased"; retryInMs: number };

/** Why a delivery could not be claimed, measuring time on the database's clock. */
export async function whyNotClaimed(ctx: { sql: SqlClient }, deliveryId: string): Promise<NotClaimed> {
  const [state] = await ctx.sql.query<{ due_in_ms: number | null; leased_for_ms: number | null }>(
    `SELECT (extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS due_in_ms,
            (extract(epoch FROM leased_until - now()) * 1000)::float8 AS leased_for_ms
     FROM deliveries WHERE id = $1`,
    [deliveryId],
  );
  if (!state) return { reason: "missing" };
  if (state.due_in_ms === null) return { reason: "finished" };
  if (state.leased_for_ms !== null && state.leased_for_ms > 0) return { reason: "leased", retryInMs: Math.ceil(state.leased_for_ms) };
  return { reason: "not_due", retryInMs: Math.max(0, Math.ceil(state.due_in_ms)) };
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

export interface AttemptToRecord {
  deliveryId: string;
  leaseToken: string;
  outcome: AttemptOutcome;
}

/**
 * Writes each attempt and its delivery's new state in one statement, so they commit together.
 * Only the holder of a lease can record: if it expired and another worker took the delivery
 * over, nothing is written for it. Returns the ids of the deliveries recorded.
 */
export async function recordAttempts(ctx: { sql: SqlClient }, records: AttemptToRecord[]): Promise<Set<string>> {
  const column = <T>(pick: (record: AttemptToRecord) => T) => records.map(pick);
  const rows = await ctx.sql.query<{ delivery_id: string }>(
    `WITH input AS (
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::int[], $6::int[], $7::text[], $8::text[], $9::delivery_status[], $10::int[])
        AS i(delivery_id, lease_token, attempt_id, started_at, duration_ms, response_code, response_body, error, status, retry_in_ms)
    ), updated AS (
      UPDATE deliveries d SET
        status = i.status,
        attempts = d.attempts + 1,
        response_code = i.response_code,
        next_attempt_at = now() + i.retry_in_ms * interval '1 millisecond',
        lease_token = NULL,
        leased_until = NULL,
        updated_at = now()
      FROM input i
      WHERE d.id = i.delivery_id AND d.lease_token = i.lease_token
      RETURNING d.id, d.attempts, d.url
    )
    INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at, duration_ms, response_code, response_body, error)
    SELECT i.attempt_id, u.id, u.attempts, u.url, i.started_at, i.duration_ms, i.response_code, i.response_body, i.error
    FROM updated u JOIN input i ON i.delivery_id = u.id
    RETURNING delivery_id`,
    [
      column((r) => r.deliveryId),
      column((r) => r.leaseToken),
      column(() => newId("attempt")),
      column((r) => r.outcome.startedAt.toISOString()),
      column((r) => r.outcome.durationMs),
      column((r) => r.outcome.responseCode),
      column((r) => r.outcome.responseBody),
      column((r) => r.outcome.error),
      column((r) => r.outcome.status),
      column((r) => r.outcome.retryInMs),
    ],
  );
  return new Set(rows.map((row) => row.delivery_id));
}
