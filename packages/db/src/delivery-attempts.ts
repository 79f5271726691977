import { newId, UNKNOWN_OUTCOME_ERROR, type DeliveryStatus, type EndpointHealth } from "@webhooks/core";
import type { SqlClient } from "./sql.ts";
import { HEALTH_COLUMNS, healthFromRow, type HealthRow } from "./subscription-health.ts";

/**
 * The worker's writes to a delivery, in the order of an attempt: claim it (a lease), then either
 * release the lease (its destination made it wait) or record the attempt as started, send, and
 * record the outcome. The values stored come from core's delivery lifecycle.
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
  /** Attempts made before this one (an abandoned one included). */
  attemptsMade: number;
  /** An earlier attempt was started and never recorded: its worker died mid-send. */
  abandonedAttempt: boolean;
  /** The subscription as it is now (contract §11: limits apply to attempts that start after a change). */
  subscription: { maxInFlight: number; rateLimit: number | null; health: EndpointHealth };
}

/**
 * Takes a lease on each delivery that is due and not leased, and returns the snapshot of those
 * it claimed, by delivery id. Deliveries missing from the result were not claimable; see
 * `whyNotClaimed`.
 *
 * The claim commits asynchronously (set_config(..., true) lasts until the end of the statement's
 * own transaction), so the webhook goes out without waiting for the WAL to reach the disk. A
 * lease lost in a database crash is harmless: the attempt's start is recorded durably before
 * anything is sent, and that write checks the lease.
 */
export async function claimDeliveries(
  ctx: { sql: SqlClient },
  input: { claims: { deliveryId: string; leaseToken: string }[]; leaseMs: number },
): Promise<Map<string, ClaimedDelivery>> {
  const rows = await ctx.sql.query<{
    id: string;
    lease_token: string;
    subscription_id: string;
    status: DeliveryStatus;
    next_attempt_at: Date | null;
    url: string;
    headers: Record<string, string>;
    secret_id: string;
    ciphertext: Uint8Array;
    previous_secret_id: string | null;
    previous_ciphertext: Uint8Array | null;
    event_id: string;
    type: string;
    data: string;
    event_created_at: Date;
    attempts: number;
    attempt_open: boolean;
    max_in_flight: number;
    rate_limit: number | null;
  } & HealthRow>(
    `UPDATE deliveries d
     SET lease_token = c.lease_token, leased_until = now() + $3::int * interval '1 millisecond'
     FROM unnest($1::text[], $2::text[]) AS c(id, lease_token), events e, signing_secrets s, subscriptions sub,
          (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
     WHERE d.id = c.id AND e.id = d.event_id AND s.id = sub.secret_id AND sub.id = d.subscription_id
       AND d.next_attempt_at <= now() + $4::int * interval '1 millisecond'
       AND (d.leased_until IS NULL OR d.leased_until < now())
     RETURNING d.id, d.lease_token, d.subscription_id, d.status::text AS status, d.next_attempt_at, d.url, d.headers, sub.secret_id, s.ciphertext,
               sub.previous_secret_id, (SELECT p.ciphertext FROM signing_secrets p WHERE p.id = sub.previous_secret_id AND sub.previous_secret_expires_at > now()) AS previous_ciphertext,
               d.event_id, e.type, e.data::text AS data,
               e.created_at AS event_created_at, d.attempts, d.attempt_open,
               sub.max_in_flight, sub.rate_limit, ${HEALTH_COLUMNS.split(", ").map((column) => `sub.${column}`).join(", ")}`,
    [input.claims.map((c) => c.deliveryId), input.claims.map((c) => c.leaseToken), input.leaseMs, DUE_TOLERANCE_MS],
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        deliveryId: row.id,
        leaseToken: row.lease_token,
        subscriptionId: row.subscription_id,
        status: row.status,
        nextAttemptAt: row.next_attempt_at,
        url: row.url,
        headers: row.headers,
        secrets: [
          { id: row.secret_id, ciphertext: row.ciphertext },
          ...(row.previous_secret_id !== null && row.previous_ciphertext !== null ? [{ id: row.previous_secret_id, ciphertext: row.previous_ciphertext }] : []),
        ],
        eventId: row.event_id,
        eventType: row.type,
        eventDataJson: row.data,
        eventCreatedAt: row.event_created_at,
        attemptsMade: row.attempts,
        abandonedAttempt: row.attempt_open,
        subscription: {
          maxInFlight: row.max_in_flight,
          rateLimit: row.rate_limit,
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

/**
 * Closes the attempt an earlier worker started and never recorded (it died, or lost its lease
 * mid-send): it stays in the log, and in `attempts`, as an attempt whose outcome is unknown,
 * because the receiver may have had the request (contract §5).
 */
export async function closeAbandonedAttempt(ctx: { sql: SqlClient }, input: { deliveryId: string; leaseToken: string }): Promise<void> {
  await ctx.sql.query(
    `WITH closed AS (
       UPDATE delivery_attempts a SET error = $3
       FROM deliveries d
       WHERE d.id = $1 AND d.lease_token = $2 AND d.attempt_open
         AND a.delivery_id = d.id AND a.number = d.attempts AND a.duration_ms IS NULL AND a.error IS NULL
     )
     UPDATE deliveries SET attempt_open = false WHERE id = $1 AND lease_token = $2`,
    [input.deliveryId, input.leaseToken, UNKNOWN_OUTCOME_ERROR],
  );
}

/** Gives leases back without an attempt: the destination made these deliveries wait. */
export async function releaseLeases(ctx: { sql: SqlClient }, leases: { deliveryId: string; leaseToken: string }[]): Promise<void> {
  await ctx.sql.query(
    `UPDATE deliveries d SET lease_token = NULL, leased_until = NULL
     FROM unnest($1::text[], $2::text[]) AS l(id, lease_token),
          (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
     WHERE d.id = l.id AND d.lease_token = l.lease_token`,
    [leases.map((l) => l.deliveryId), leases.map((l) => l.leaseToken)],
  );
}

export interface AttemptStart {
  deliveryId: string;
  leaseToken: string;
  startedAt: Date;
}

/**
 * Records each attempt as started, before its request leaves (contract §5: the log counts every
 * request a receiver may have seen): the attempt row, the delivery's `attempts`, and
 * `attempt_open`. Committed durably, unlike the claim. Returns the attempt number by delivery
 * id; a delivery missing from it lost its lease and must not be sent.
 */
export async function beginAttempts(ctx: { sql: SqlClient }, starts: AttemptStart[]): Promise<Map<string, number>> {
  const rows = await ctx.sql.query<{ delivery_id: string; number: number }>(
    `WITH input AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS i(delivery_id, lease_token, attempt_id, started_at)
     ), started AS (
       UPDATE deliveries d SET attempts = d.attempts + 1, attempt_open = true
       FROM input i
       WHERE d.id = i.delivery_id AND d.lease_token = i.lease_token
       RETURNING d.id, d.attempts, d.url
     )
     INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at)
     SELECT i.attempt_id, s.id, s.attempts, s.url, i.started_at FROM started s JOIN input i ON i.delivery_id = s.id
     RETURNING delivery_id, number`,
    [starts.map((s) => s.deliveryId), starts.map((s) => s.leaseToken), starts.map(() => newId("attempt")), starts.map((s) => s.startedAt.toISOString())],
  );
  return new Map(rows.map((row) => [row.delivery_id, row.number]));
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
  const rows = await ctx.sql.query<{ delivery_id: string }>(
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
    RETURNING a.delivery_id`,
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
  return new Set(rows.map((row) => row.delivery_id));
}
