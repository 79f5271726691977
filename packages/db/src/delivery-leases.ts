import { newId, UNKNOWN_OUTCOME_ERROR, type DeliveryStatus, type EndpointHealth } from "@webhooks/core";
import type { SqlClient } from "./sql.ts";
import { healthColumns, healthFromRow } from "./subscription-health.ts";

/**
 * Writes to `deliveries` live in one module per stage of a delivery's life, and nowhere else
 * (packages/db/test/delivery-writers.test.ts checks it): created with its event (events.ts),
 * attempted under a lease (this module), resent (delivery-resends.ts), deleted when expired
 * (retention.ts). deliveries.ts and due-deliveries.ts only read.
 *
 * This module: the worker's writes to a delivery, in the order of an attempt: claim it (a lease, with the
 * attempt recorded as started), then either withdraw the attempt (its destination made it wait)
 * or send and record the outcome. The values stored come from core's delivery lifecycle.
 *
 * The claim is a lease on the row. The queue already hands a job to one worker at a time, but a
 * worker that loses Redis or stalls past its job lock can see its job handed to another worker
 * while its own request is still in flight; the lease makes that second worker wait instead of
 * sending the same delivery twice at once. The lease outlives the attempt's timeout.
 *
 * Every verb takes many deliveries at once: a busy worker batches the statements of the jobs it
 * runs concurrently into one each, saving round trips and commits.
 */

/** Wake-ups a little early (clock skew between Redis, worker and database) still count as due. */
const DUE_TOLERANCE_MS = 500;

export interface ClaimedDelivery {
  deliveryId: string;
  leaseToken: string;
  subscriptionId: string;
  /** The state it was claimed in (a due delivery: queued, or failed with its retry come due). */
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** The snapshot taken at creation (contract §8). */
  url: string;
  /** The subscription's extra request headers when the delivery was created (contract §12). */
  headers: Record<string, string>;
  /**
   * The keys to sign this attempt with: the subscription's current secret, then, during a
   * rotation's overlap, the previous one (contract §12). Read from the subscription at claim time,
   * not from the delivery's own secret_id, so that deliveries created before a rotation follow
   * the same rule as new ones: both signatures until the overlap ends, then only the new one.
   */
  secrets: { id: string; ciphertext: Uint8Array }[];
  eventId: string;
  eventType: string;
  /** The event's data as JSON text, sent as it is stored. */
  eventDataJson: string;
  eventCreatedAt: Date;
  /** This attempt's number: it is in the log as started (see claimDeliveries). */
  attemptNumber: number;
  /** An earlier attempt was started and never recorded (its worker died mid-send); the claim closed it. */
  closedAbandonedAttempt: boolean;
  /** The subscription as it is now (contract §11: limits apply to attempts that start after a change). */
  subscription: { maxInFlight: number; rateLimit: number | null; health: EndpointHealth };
}

/**
 * The claim (see claimDeliveries). `before` is the row as the statement found it (a self-join
 * sees the snapshot, not the update), which tells whether an attempt was left open and which
 * number it had. Exported for the test of its plan (packages/db/test/claim-plan.test.ts).
 */
export const CLAIM_SQL = `WITH claimed AS (
       UPDATE deliveries d
       SET lease_token = c.lease_token, leased_until = now() + $3::int * interval '1 millisecond',
           attempts = d.attempts + 1, attempt_open = true
       FROM unnest($1::text[], $2::text[], $5::text[]) AS c(id, lease_token, attempt_id), deliveries before,
            (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
       WHERE d.id = c.id AND before.id = d.id
         -- Due. The coalesce changes no answer (a finished delivery has no next attempt and is
         -- never due), but it keeps the due index out of every plan of this statement: that
         -- index is partial (next_attempt_at IS NOT NULL), and a plain comparison implies its
         -- predicate. A cached plan that walked it instead of finding the rows by id (chosen
         -- when statistics were taken while little was due) reads every due delivery on each
         -- claim: most costly exactly when a backlog makes them many.
         AND coalesce(d.next_attempt_at, 'infinity') <= now() + $4::int * interval '1 millisecond'
         AND (d.leased_until IS NULL OR d.leased_until < now())
       RETURNING d.id, d.lease_token, d.subscription_id, d.status, d.next_attempt_at, d.url, d.headers, d.event_id,
                 d.attempts, before.attempt_open AS was_open, c.attempt_id
     ), closed AS (
       UPDATE delivery_attempts a SET error = $6
       FROM claimed c
       WHERE c.was_open AND a.delivery_id = c.id AND a.number = c.attempts - 1 AND a.duration_ms IS NULL AND a.error IS NULL
     ), started AS (
       INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at)
       SELECT c.attempt_id, c.id, c.attempts, c.url, now() FROM claimed c
     )
     SELECT c.id, c.lease_token AS "leaseToken", c.subscription_id AS "subscriptionId", c.status::text AS status, c.next_attempt_at AS "nextAttemptAt",
            c.url, c.headers, sub.secret_id AS "secretId", s.ciphertext, sub.previous_secret_id AS "previousSecretId",
            (SELECT p.ciphertext FROM signing_secrets p WHERE p.id = sub.previous_secret_id AND sub.previous_secret_expires_at > now()) AS "previousCiphertext",
            c.event_id AS "eventId", e.type, e.data::text AS data, e.created_at AS "eventCreatedAt", c.attempts, c.was_open AS "wasOpen",
            sub.max_in_flight AS "maxInFlight", sub.rate_limit AS "rateLimit", ${healthColumns("sub")}
     FROM claimed c
     JOIN events e ON e.id = c.event_id
     JOIN subscriptions sub ON sub.id = c.subscription_id
     JOIN signing_secrets s ON s.id = sub.secret_id`;

/**
 * Claims each delivery that is due and not leased, and records its attempt as started, in one
 * statement: a lease on the row, `attempts` + 1, `attempt_open`, and the attempt's row in the log
 * (contract §5: the log counts every request a receiver may have seen, so the start is in it
 * before the request can leave). An attempt an earlier worker began and never recorded (it died,
 * or lost its lease mid-send) is closed in the same statement as one whose outcome is unknown.
 *
 * Committed asynchronously (set_config(..., true) lasts until the end of the statement's own
 * transaction): the request leaves without waiting for the WAL to reach the disk, which cost a
 * flush per claim batch, ~2.7 ms of publish-to-receive p50 at 500 events/s and ~10% of the CPU
 * per delivery of W10 (measured 2026-11-26). The start is visible at once and is on disk within
 * PostgreSQL's WAL writer delay, or sooner with the next durable commit of any connection (a
 * publish, a record). What that gives up: a crash of PostgreSQL itself (not of a worker, and not
 * a clean restart) may lose the starts of the last fraction of a second; those deliveries go back
 * to due, their records then fail the lease check, and they are attempted again, so a receiver
 * may have seen a request, with the same webhook-id as the next, that the log does not show.
 *
 * Returns the snapshot of those it claimed, by delivery id; a delivery missing from it was not
 * claimable (see `whyNotClaimed`). If the destination then makes the delivery wait, `withdrawAttempts`
 * takes the start back: nothing was sent.
 */
export async function claimDeliveries(
  ctx: { sql: SqlClient },
  input: { claims: { deliveryId: string; leaseToken: string }[]; leaseMs: number },
): Promise<Map<string, ClaimedDelivery>> {
  const rows = await ctx.sql.query<{
    id: string;
    leaseToken: string;
    subscriptionId: string;
    status: DeliveryStatus;
    nextAttemptAt: Date | null;
    url: string;
    headers: Record<string, string>;
    secretId: string;
    ciphertext: Uint8Array;
    previousSecretId: string | null;
    previousCiphertext: Uint8Array | null;
    eventId: string;
    type: string;
    data: string;
    eventCreatedAt: Date;
    attempts: number;
    wasOpen: boolean;
    maxInFlight: number;
    rateLimit: number | null;
  } & EndpointHealth>(
    CLAIM_SQL,
    [
      input.claims.map((c) => c.deliveryId),
      input.claims.map((c) => c.leaseToken),
      input.leaseMs,
      DUE_TOLERANCE_MS,
      input.claims.map(() => newId("attempt")),
      UNKNOWN_OUTCOME_ERROR,
    ],
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        deliveryId: row.id,
        leaseToken: row.leaseToken,
        subscriptionId: row.subscriptionId,
        status: row.status,
        nextAttemptAt: row.nextAttemptAt,
        url: row.url,
        headers: row.headers,
        secrets: [
          { id: row.secretId, ciphertext: row.ciphertext },
          ...(row.previousSecretId !== null && row.previousCiphertext !== null ? [{ id: row.previousSecretId, ciphertext: row.previousCiphertext }] : []),
        ],
        eventId: row.eventId,
        eventType: row.type,
        eventDataJson: row.data,
        eventCreatedAt: row.eventCreatedAt,
        attemptNumber: row.attempts,
        closedAbandonedAttempt: row.wasOpen,
        subscription: {
          maxInFlight: row.maxInFlight,
          rateLimit: row.rateLimit,
          health: healthFromRow(row),
        },
      },
    ]),
  );
}

export type NotClaimed =
  | { reason: "missing" | "finished" }
  | { reason: "not_due" | "leased"; retryInMs: number };

/** Why a delivery could not be claimed, measuring time on the database's clock. */
export async function whyNotClaimed(ctx: { sql: SqlClient }, deliveryId: string): Promise<NotClaimed> {
  const [state] = await ctx.sql.query<{ dueInMs: number | null; leasedForMs: number | null }>(
    `SELECT (extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS "dueInMs",
            (extract(epoch FROM leased_until - now()) * 1000)::float8 AS "leasedForMs"
     FROM deliveries WHERE id = $1`,
    [deliveryId],
  );
  if (!state) return { reason: "missing" };
  if (state.dueInMs === null) return { reason: "finished" };
  if (state.leasedForMs !== null && state.leasedForMs > 0) return { reason: "leased", retryInMs: Math.ceil(state.leasedForMs) };
  return { reason: "not_due", retryInMs: Math.max(0, Math.ceil(state.dueInMs)) };
}

/**
 * Takes back the attempts just claimed and not sent, and the leases: the destination made these
 * deliveries wait (contract §11: waiting spends no attempt). Only the lease holder can, and only
 * while the attempt is still open, so an attempt another worker has taken over is left alone.
 */
export async function withdrawAttempts(ctx: { sql: SqlClient }, leases: { deliveryId: string; leaseToken: string; attemptNumber: number }[]): Promise<void> {
  await ctx.sql.query(
    `WITH withdrawn AS (
       UPDATE deliveries d SET lease_token = NULL, leased_until = NULL, attempts = d.attempts - 1, attempt_open = false
       FROM unnest($1::text[], $2::text[], $3::int[]) AS l(id, lease_token, number)
       WHERE d.id = l.id AND d.lease_token = l.lease_token AND d.attempt_open AND d.attempts = l.number
       RETURNING d.id, l.number
     )
     DELETE FROM delivery_attempts a USING withdrawn w WHERE a.delivery_id = w.id AND a.number = w.number`,
    [leases.map((l) => l.deliveryId), leases.map((l) => l.leaseToken), leases.map((l) => l.attemptNumber)],
  );
}

export interface AttemptOutcome {
  durationMs: number;
  responseCode: number | null;
  responseBody: string | null;
  error: string | null;
  /** The delivery's new state, from core's `nextState`. */
  status: DeliveryStatus;
  /** Wait before the next attempt, or null when nothing more is planned. */
  nextAttemptInMs: number | null;
}

export interface AttemptToRecord {
  deliveryId: string;
  leaseToken: string;
  attemptNumber: number;
  outcome: AttemptOutcome;
}

/**
 * Writes each attempt's outcome and its delivery's new state in one statement, so they commit
 * together. Only the holder of a lease can record: if it expired and another worker took the
 * delivery over (and closed this attempt as one of unknown outcome), nothing is written.
 * Returns the ids of the deliveries recorded.
 */
export async function recordAttempts(ctx: { sql: SqlClient }, records: AttemptToRecord[]): Promise<Set<string>> {
  const column = <T>(pick: (record: AttemptToRecord) => T) => records.map(pick);
  const rows = await ctx.sql.query<{ deliveryId: string }>(
    `WITH input AS (
      SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::int[], $6::text[], $7::text[], $8::delivery_status[], $9::int[])
        AS i(delivery_id, lease_token, number, duration_ms, response_code, response_body, error, status, next_attempt_in_ms)
    ), updated AS (
      UPDATE deliveries d SET
        status = i.status,
        response_code = i.response_code,
        next_attempt_at = now() + i.next_attempt_in_ms * interval '1 millisecond',
        lease_token = NULL,
        leased_until = NULL,
        attempt_open = false,
        updated_at = now()
      FROM input i
      WHERE d.id = i.delivery_id AND d.lease_token = i.lease_token
      RETURNING d.id
    )
    UPDATE delivery_attempts a SET duration_ms = i.duration_ms, response_code = i.response_code, response_body = i.response_body, error = i.error
    FROM updated u JOIN input i ON i.delivery_id = u.id
    WHERE a.delivery_id = u.id AND a.number = i.number
    RETURNING a.delivery_id AS "deliveryId"`,
    [
      column((r) => r.deliveryId),
      column((r) => r.leaseToken),
      column((r) => r.attemptNumber),
      column((r) => r.outcome.durationMs),
      column((r) => r.outcome.responseCode),
      column((r) => r.outcome.responseBody),
      column((r) => r.outcome.error),
      column((r) => r.outcome.status),
      column((r) => r.outcome.nextAttemptInMs),
    ],
  );
  return new Set(rows.map((row) => row.deliveryId));
}
