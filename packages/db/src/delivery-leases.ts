import { type DeliveryStatus, type EndpointHealth, newId, UNKNOWN_OUTCOME_ERROR } from "@webhooks/core";
import { IN_TURN } from "./due-deliveries.ts";
import type { SqlClient } from "./sql.ts";
import { healthColumns, healthFromRow } from "./subscription-health.ts";

/**
 * Writes to `deliveries` live in one module per stage of a delivery's life, and nowhere else
 * (packages/db/test/delivery-writers.test.ts checks it): created with its event (events.ts),
 * attempted under a lease (this module), resent (delivery-resends.ts), ended when its payload is
 * erased (payload-erasure.ts), deleted when expired (retention.ts). deliveries.ts and
 * due-deliveries.ts only read.
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
  /** The snapshot taken at creation (docs/api.md#updates-apply-to-the-next-delivery). */
  url: string;
  /** The subscription's extra request headers when the delivery was created. */
  headers: Record<string, string>;
  /**
   * The subscription's endpoint credentials when the delivery was created, sealed; null for none
   * (docs/api.md#endpoint-authentication). A row never changes, so its id names what it holds.
   */
  credentials: { id: string; ciphertext: Uint8Array } | null;
  /** Made by POST /v1/subscriptions/{id}/test (docs/api.md#send-a-test-event). */
  test: boolean;
  /**
   * In its subscription's line (docs/api.md#ordered-delivery): claimed because every earlier one
   * is finished. When it is finished too, the next one's turn has come.
   */
  ordered: boolean;
  /**
   * The keys to sign this attempt with: the subscription's current secret, then, during a
   * rotation's overlap, the previous one (docs/api.md#rotate-the-signing-secret). Read from the
   * subscription at claim time, not from the delivery's own secret_id, so that deliveries created
   * before a rotation follow the same rule as new ones: both signatures until the overlap ends,
   * then only the new one.
   */
  secrets: { id: string; ciphertext: Uint8Array }[];
  eventId: string;
  eventType: string;
  /** The event's data as JSON text, sent as it is stored; null once erased (see endDeliveriesWithoutPayload). */
  eventDataJson: string | null;
  eventCreatedAt: Date;
  /** The W3C traceparent its event was published with, if the API traced it (docs/operations.md#tracing). */
  traceparent: string | null;
  /** This attempt: its id, number and start, in the log as in flight (see claimDeliveries). */
  attempt: OpenAttempt;
  /** An earlier attempt was started and never recorded (its worker died mid-send); the claim closed it. */
  closedAbandonedAttempt: boolean;
  /**
   * The subscription as it is now: limits apply to attempts that start after a change. `deleted`:
   * its deliveries already created still go out, as with a pause.
   */
  subscription: { maxInFlight: number; rateLimit: number | null; deleted: boolean; health: EndpointHealth };
}

/** An attempt started and not yet recorded, as its delivery's row holds it. */
export interface OpenAttempt {
  id: string;
  number: number;
  startedAt: Date;
}

/**
 * The claim (see claimDeliveries). `before` is the row as the statement found it (a self-join
 * sees the snapshot, not the update), which tells whether an attempt was left open, and its
 * id and start. Exported for the test of its plan (packages/db/test/claim-plan.test.ts).
 */
export const CLAIM_SQL = `WITH claimed AS (
       UPDATE deliveries d
       SET lease_token = c.lease_token, leased_until = now() + $3::int * interval '1 millisecond',
           attempts = d.attempts + 1, open_attempt_id = c.attempt_id, open_attempt_started_at = now()
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
         -- An ordered delivery only at the head of its line: one probe of the line's index.
         AND ${IN_TURN("d")}
       RETURNING d.id, d.lease_token, d.subscription_id, d.status, d.next_attempt_at, d.url, d.headers, d.credentials_id, d.event_id, d.test, d.ordered,
                 d.attempts, d.open_attempt_id, d.open_attempt_started_at,
                 before.open_attempt_id AS abandoned_id, before.open_attempt_started_at AS abandoned_started_at
     ), closed AS (
       INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, error)
       SELECT c.abandoned_id, c.id, c.subscription_id, c.attempts - 1, c.url, c.abandoned_started_at, $6 FROM claimed c
       WHERE c.abandoned_id IS NOT NULL
     )
     SELECT c.id, c.lease_token AS "leaseToken", c.subscription_id AS "subscriptionId", c.status::text AS status, c.next_attempt_at AS "nextAttemptAt",
            c.url, c.headers, c.credentials_id AS "credentialsId", cr.ciphertext AS "credentialsCiphertext",
            c.test, c.ordered, sub.secret_id AS "secretId", s.ciphertext, sub.previous_secret_id AS "previousSecretId",
            (SELECT p.ciphertext FROM signing_secrets p WHERE p.id = sub.previous_secret_id AND sub.previous_secret_expires_at > now()) AS "previousCiphertext",
            c.event_id AS "eventId", e.type, e.data::text AS data, e.created_at AS "eventCreatedAt", e.traceparent,
            c.open_attempt_id AS "attemptId", c.attempts, c.open_attempt_started_at AS "attemptStartedAt", c.abandoned_id IS NOT NULL AS "wasOpen",
            sub.max_in_flight AS "maxInFlight", sub.rate_limit AS "rateLimit", sub.deleted_at IS NOT NULL AS "subscriptionDeleted", ${healthColumns("sub")}
     FROM claimed c
     JOIN events e ON e.id = c.event_id
     JOIN subscriptions sub ON sub.id = c.subscription_id
     JOIN signing_secrets s ON s.id = sub.secret_id
     LEFT JOIN endpoint_credentials cr ON cr.id = c.credentials_id`;

/**
 * Claims each delivery that is due and not leased, and records its attempt as started, in one
 * statement: a lease on the row, `attempts` + 1, and the attempt's id and start on the row, which
 * the attempt log shows as in flight (docs/api.md#delivery-states: the log counts every request a
 * receiver may have seen, so the start is in it before the request can leave). An attempt an
 * earlier worker began and never recorded (it died, or lost its lease mid-send) is written to
 * delivery_attempts in the same statement, as one whose outcome is unknown.
 *
 * Committed asynchronously (set_config(..., true) lasts until the end of the statement's own
 * transaction): the request leaves without waiting for the WAL to reach the disk, which would cost
 * a flush per claim batch on every delivery's path (docs/architecture.md#design-decisions). The
 * start is visible at once and is on disk within PostgreSQL's WAL writer delay, or sooner with the
 * next durable commit of any connection (a publish, a record). What that gives up: a crash of
 * PostgreSQL itself (not of a worker, and not a clean restart) may lose the starts of the last
 * fraction of a second; those deliveries go back to due, their records then fail the lease check,
 * and they are attempted again, so a receiver may have seen a request, with the same webhook-id as
 * the next, that the log does not show.
 *
 * Returns the snapshot of those it claimed, by delivery id; a delivery missing from it was not
 * claimable (see `whyNotClaimed`). If the destination then makes the delivery wait, `withdrawAttempts`
 * takes the start back: nothing was sent.
 *
 * A delivery asked for more than once in one call (two jobs of a worker holding it at once, as
 * when Redis lost a dispatch and the reconciler gave its deliveries jobs of their own) is claimed
 * once: its snapshot carries the lease token of the claim that got it, and only that claimant
 * may send it.
 */
export async function claimDeliveries(
  ctx: { sql: SqlClient },
  input: { claims: { deliveryId: string; leaseToken: string }[]; leaseMs: number },
): Promise<Map<string, ClaimedDelivery>> {
  const rows = await ctx.sql.query<
    {
      id: string;
      leaseToken: string;
      subscriptionId: string;
      status: DeliveryStatus;
      nextAttemptAt: Date | null;
      url: string;
      headers: Record<string, string>;
      credentialsId: string | null;
      credentialsCiphertext: Uint8Array | null;
      test: boolean;
      ordered: boolean;
      secretId: string;
      ciphertext: Uint8Array;
      previousSecretId: string | null;
      previousCiphertext: Uint8Array | null;
      eventId: string;
      type: string;
      data: string | null;
      eventCreatedAt: Date;
      traceparent: string | null;
      attemptId: string;
      attempts: number;
      attemptStartedAt: Date;
      wasOpen: boolean;
      maxInFlight: number;
      rateLimit: number | null;
      subscriptionDeleted: boolean;
    } & EndpointHealth
  >(CLAIM_SQL, [
    input.claims.map((c) => c.deliveryId),
    input.claims.map((c) => c.leaseToken),
    input.leaseMs,
    DUE_TOLERANCE_MS,
    input.claims.map(() => newId("attempt")),
    UNKNOWN_OUTCOME_ERROR,
  ]);
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
        credentials:
          row.credentialsId !== null && row.credentialsCiphertext !== null
            ? { id: row.credentialsId, ciphertext: row.credentialsCiphertext }
            : null,
        test: row.test,
        ordered: row.ordered,
        secrets: [
          { id: row.secretId, ciphertext: row.ciphertext },
          ...(row.previousSecretId !== null && row.previousCiphertext !== null
            ? [{ id: row.previousSecretId, ciphertext: row.previousCiphertext }]
            : []),
        ],
        eventId: row.eventId,
        eventType: row.type,
        eventDataJson: row.data,
        eventCreatedAt: row.eventCreatedAt,
        traceparent: row.traceparent,
        attempt: { id: row.attemptId, number: row.attempts, startedAt: row.attemptStartedAt },
        closedAbandonedAttempt: row.wasOpen,
        subscription: {
          maxInFlight: row.maxInFlight,
          rateLimit: row.rateLimit,
          deleted: row.subscriptionDeleted,
          health: healthFromRow(row),
        },
      },
    ]),
  );
}

/**
 * Why a delivery was not claimed. `in_order`: it is behind others in its subscription's line
 * (docs/api.md#ordered-delivery), and its turn comes when they are finished, not at a time.
 */
export type NotClaimed =
  | { reason: "missing" | "finished" | "in_order" }
  | { reason: "not_due" | "leased"; retryInMs: number };

/** Why a delivery could not be claimed, measuring time on the database's clock. */
export async function whyNotClaimed(ctx: { sql: SqlClient }, deliveryId: string): Promise<NotClaimed> {
  const [state] = await ctx.sql.query<{ dueInMs: number | null; leasedForMs: number | null; inTurn: boolean }>(
    `SELECT (extract(epoch FROM d.next_attempt_at - now()) * 1000)::float8 AS "dueInMs",
            (extract(epoch FROM d.leased_until - now()) * 1000)::float8 AS "leasedForMs",
            ${IN_TURN("d")} AS "inTurn"
     FROM deliveries d WHERE d.id = $1`,
    [deliveryId],
  );
  if (!state) return { reason: "missing" };
  if (state.dueInMs === null) return { reason: "finished" };
  if (state.leasedForMs !== null && state.leasedForMs > 0)
    return { reason: "leased", retryInMs: Math.ceil(state.leasedForMs) };
  if (!state.inTurn) return { reason: "in_order" };
  return { reason: "not_due", retryInMs: Math.max(0, Math.ceil(state.dueInMs)) };
}

/**
 * Takes back the attempts just claimed and not sent, and the leases: the destination made these
 * deliveries wait, and waiting spends no attempt. Only the lease holder can, and only
 * while the attempt is still open, so an attempt another worker has taken over is left alone.
 */
export async function withdrawAttempts(ctx: { sql: SqlClient }, leases: AttemptLease[]): Promise<void> {
  await ctx.sql.query(
    `UPDATE deliveries d SET lease_token = NULL, leased_until = NULL, attempts = d.attempts - 1,
       open_attempt_id = NULL, open_attempt_started_at = NULL
     FROM unnest($1::text[], $2::text[], $3::text[]) AS l(id, lease_token, attempt_id)
     WHERE d.id = l.id AND d.lease_token = l.lease_token AND d.open_attempt_id = l.attempt_id`,
    [leases.map((l) => l.deliveryId), leases.map((l) => l.leaseToken), leases.map((l) => l.attempt.id)],
  );
}

/**
 * Ends claimed deliveries whose event's payload was erased after they were queued
 * (docs/api.md#erase-an-events-payload): nothing is left to send, so the attempt just claimed is
 * taken back, as withdrawAttempts does, and the delivery is `failed` for good with
 * `failure_reason` "payload_deleted". Only the lease holder can.
 */
export async function endDeliveriesWithoutPayload(ctx: { sql: SqlClient }, leases: AttemptLease[]): Promise<void> {
  await ctx.sql.query(
    `UPDATE deliveries d SET status = 'failed', next_attempt_at = NULL, failure_reason = 'payload_deleted',
       lease_token = NULL, leased_until = NULL, attempts = d.attempts - 1,
       open_attempt_id = NULL, open_attempt_started_at = NULL, updated_at = now()
     FROM unnest($1::text[], $2::text[], $3::text[]) AS l(id, lease_token, attempt_id)
     WHERE d.id = l.id AND d.lease_token = l.lease_token AND d.open_attempt_id = l.attempt_id`,
    [leases.map((l) => l.deliveryId), leases.map((l) => l.leaseToken), leases.map((l) => l.attempt.id)],
  );
}

export interface AttemptOutcome {
  durationMs: number;
  responseCode: number | null;
  responseBody: string | null;
  error: string | null;
  /** No response arrived before the attempt's time ran out (the stats count it as a timeout). */
  timedOut: boolean;
  /** The delivery's new state, from core's `nextState`. */
  status: DeliveryStatus;
  /** Wait before the next attempt, or null when nothing more is planned. */
  nextAttemptInMs: number | null;
}

/** A claimed attempt, as the worker that claimed it refers to it. */
export interface AttemptLease {
  deliveryId: string;
  leaseToken: string;
  attempt: OpenAttempt;
}

export interface AttemptToRecord extends AttemptLease {
  outcome: AttemptOutcome;
}

/** An attempt recorded (see recordAttempts). */
export interface RecordedAttempt {
  /**
   * Its subscription's health as stored now shows failures, an open circuit or a hold. The
   * claim's snapshot may predate that (other attempts recorded since), and a success must then
   * write the health even where the snapshot says it would change nothing.
   */
  subscriptionUnwell: boolean;
}

/** RecordedAttempt.subscriptionUnwell, of the subscription `s`. */
const SUBSCRIPTION_UNWELL =
  "(s.consecutive_failures > 0 OR s.failing_since IS NOT NULL OR s.circuit_opened_at IS NOT NULL OR s.held_until IS NOT NULL)";

/**
 * Writes each attempt, with its outcome, to the log and its delivery's new state, in one statement,
 * so they commit together. Only the holder of a lease can record: if it expired and another
 * worker took the delivery over (and closed this attempt as one of unknown outcome), nothing is
 * written. `timeoutMs`: see SqlClient.query.
 * Returns the deliveries recorded, by id.
 */
export async function recordAttempts(
  ctx: { sql: SqlClient },
  records: AttemptToRecord[],
  options: { timeoutMs?: number } = {},
): Promise<Map<string, RecordedAttempt>> {
  const column = <T>(pick: (record: AttemptToRecord) => T) => records.map(pick);
  const rows = await ctx.sql.query<{ deliveryId: string; subscriptionUnwell: boolean }>(
    `WITH input AS (
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::int[], $7::int[], $8::text[], $9::text[], $10::delivery_status[], $11::int[], $12::boolean[])
        AS i(delivery_id, lease_token, attempt_id, number, started_at, duration_ms, response_code, response_body, error, status, next_attempt_in_ms, timed_out)
    ), updated AS (
      UPDATE deliveries d SET
        status = i.status,
        response_code = i.response_code,
        next_attempt_at = now() + i.next_attempt_in_ms * interval '1 millisecond',
        lease_token = NULL,
        leased_until = NULL,
        open_attempt_id = NULL,
        open_attempt_started_at = NULL,
        updated_at = now()
      FROM input i
      WHERE d.id = i.delivery_id AND d.lease_token = i.lease_token AND d.open_attempt_id = i.attempt_id
      RETURNING d.id, d.url, d.subscription_id, i.lease_token
    ), logged AS (
      -- Only the records that held the lease: one that lost it may share the batch with the one
      -- that took it over (the same delivery, even the same attempt), and must write nothing.
      INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code, timed_out, response_body, error)
      SELECT i.attempt_id, u.id, u.subscription_id, i.number, u.url, i.started_at, i.duration_ms, i.response_code, i.timed_out, i.response_body, i.error
      FROM updated u JOIN input i ON i.delivery_id = u.id AND i.lease_token = u.lease_token
      RETURNING delivery_id
    )
    SELECT l.delivery_id AS "deliveryId", ${SUBSCRIPTION_UNWELL} AS "subscriptionUnwell"
    FROM logged l JOIN updated u ON u.id = l.delivery_id JOIN subscriptions s ON s.id = u.subscription_id`,
    [
      column((r) => r.deliveryId),
      column((r) => r.leaseToken),
      column((r) => r.attempt.id),
      column((r) => r.attempt.number),
      column((r) => r.attempt.startedAt),
      column((r) => r.outcome.durationMs),
      column((r) => r.outcome.responseCode),
      column((r) => r.outcome.responseBody),
      column((r) => r.outcome.error),
      column((r) => r.outcome.status),
      column((r) => r.outcome.nextAttemptInMs),
      column((r) => r.outcome.timedOut),
    ],
    options,
  );
  return new Map(rows.map((row) => [row.deliveryId, { subscriptionUnwell: row.subscriptionUnwell }]));
}

/**
 * The attempt, if its outcome is in the log, as recordAttempts answers for it. For a worker whose
 * record failed with its connection and, tried again, found the lease no longer held: the first
 * try may have committed before its answer was lost. An attempt another claim closed as one of
 * unknown outcome is not recorded.
 */
export async function recordedAttempt(
  ctx: { sql: SqlClient },
  attemptId: string,
): Promise<RecordedAttempt | undefined> {
  const [row] = await ctx.sql.query<{ subscriptionUnwell: boolean }>(
    `SELECT ${SUBSCRIPTION_UNWELL} AS "subscriptionUnwell"
     FROM delivery_attempts a JOIN subscriptions s ON s.id = a.subscription_id
     WHERE a.id = $1 AND a.error IS DISTINCT FROM $2`,
    [attemptId, UNKNOWN_OUTCOME_ERROR],
  );
  return row;
}
