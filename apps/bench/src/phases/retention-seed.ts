import type pg from "pg";
import { createUlidFunction, loadWithoutIndexes, type SeedSteps } from "../seed-sql.ts";
import { settings } from "../settings.ts";

/** Event types of the seeded log; none of them is the type the load publishes. */
export const SEEDED_TYPES = [
  "order.created",
  "order.paid",
  "customer.updated",
  "charge.refunded",
  "payout.failed",
] as const;

export interface SeededLog {
  deliveries: number;
  attempts: number;
  events: number;
  /** Finished deliveries older than the retention of the pruning window: what a pass may delete. */
  prunable: number;
  /** Bytes on disk of the three tables with their indexes. */
  bytes: number;
  seconds: number;
  steps: SeedSteps;
}

/**
 * A long-lived delivery log, written with set-based SQL alone:
 * - 100 subscriptions (dummy secrets and a closed port: no worker ever sends these), subscription
 *   s to type s % 5, so the load's `invoice.paid` matches none of them;
 * - events spread evenly over the last 30 days (up to an hour ago), 10 deliveries each, to ten
 *   subscriptions of the event's type;
 * - delivery n's fate by (n + n / 100) % 100: 88% delivered (4% of all on their second attempt,
 *   after a 500), 10% failed for good after 3 attempts (500 or 503), 2% failed with a retry
 *   planned a day or more ahead: those the pruner must keep whatever their age, and the
 *   reconciler finds none of them due;
 * - an attempt row per attempt (1.2 per delivery), with a short response body.
 * Nothing is queued: a queued delivery would be due, and the worker of the phase would try to send it.
 */
export async function seedRetentionLog(db: pg.Client): Promise<SeededLog> {
  const started = performance.now();
  const { deliveries, subscriptions, deliveriesPerEvent, spanDays, retentionDays } = settings.retention;
  const events = deliveries / deliveriesPerEvent;
  await createUlidFunction(db);
  const steps = await loadWithoutIndexes(db, ["events", "deliveries", "delivery_attempts"], async () => {
    await db.query(
      `INSERT INTO signing_secrets (id, ciphertext)
       SELECT 'sec_' || pg_temp.ulid('2020-01-01', s), '\\x00'::bytea FROM generate_series(0, $1::int - 1) AS s`,
      [subscriptions],
    );
    await db.query(
      `INSERT INTO subscriptions (id, url, events, secret_id, created_at)
       SELECT 'sub_' || pg_temp.ulid('2020-01-01', s), 'http://127.0.0.1:9/s' || s, ARRAY[($2::text[])[s % 5 + 1]],
              'sec_' || pg_temp.ulid('2020-01-01', s), now() - interval '31 days'
       FROM generate_series(0, $1::int - 1) AS s`,
      [subscriptions, SEEDED_TYPES],
    );
    // Event k at now - spanDays + k steps, so that the last is an hour ago.
    const at = `date_trunc('milliseconds', now() - $2::int * interval '1 day' + k * ((($2::int * interval '1 day') - interval '1 hour') / $1::int))`;
    await db.query(
      `INSERT INTO events (id, type, data, created_at)
       SELECT 'evt_' || pg_temp.ulid(t.at, k), ($3::text[])[k % 5 + 1], jsonb_build_object('order_id', 'ord_' || k, 'amount', 4200, 'currency', 'usd'), t.at
       FROM generate_series(0, $1::int - 1) AS k, LATERAL (SELECT ${at} AS at) AS t`,
      [events, spanDays, SEEDED_TYPES],
    );
    // Delivery n = k * 10 + j goes to subscription (k % 5) + 5 * ((k / 5 + j) % 20): ten distinct
    // subscriptions, all of the event's type. What is the same for every delivery of an event (its
    // time, the ULID's time part, the event id) is computed once per event: OFFSET 0 keeps
    // PostgreSQL from folding that subquery into the join, which would compute it per delivery.
    // The subscriptions' columns come from arrays, by slot. (The ids are those of the ulid function.)
    await db.query(
      `INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, attempts, response_code,
                               next_attempt_at, created_at, updated_at)
       SELECT 'dlv_' || t.time_part || '000000' || pg_temp.crockford10(d.n), subs.ids[d.slot + 1], t.event_id,
              ($3::text[])[k % 5 + 1], subs.urls[d.slot + 1], subs.secrets[d.slot + 1],
              CASE WHEN m < 88 THEN 'delivered' ELSE 'failed' END::delivery_status,
              CASE WHEN m < 4 THEN 2 WHEN m < 88 THEN 1 WHEN m < 98 THEN 3 ELSE 2 END,
              CASE WHEN m < 88 THEN 200 WHEN m < 98 AND m % 2 = 0 THEN 500 ELSE 503 END,
              CASE WHEN m >= 98 THEN now() + interval '1 day' + (d.n % 1440) * interval '1 minute' END,
              t.at, t.at + interval '5 seconds'
       FROM (SELECT array_agg(id ORDER BY id) AS ids, array_agg(url ORDER BY id) AS urls, array_agg(secret_id ORDER BY id) AS secrets FROM subscriptions) AS subs,
            generate_series(0, $1::int - 1) AS k,
            LATERAL (SELECT a.at, p.time_part, 'evt_' || p.time_part || '000000' || pg_temp.crockford10(k) AS event_id
                     FROM (SELECT ${at} AS at) AS a,
                          LATERAL (SELECT pg_temp.crockford10((extract(epoch FROM a.at) * 1000)::bigint) AS time_part) AS p
                     OFFSET 0) AS t,
            LATERAL (SELECT k * $4::bigint + j AS n, (k % 5) + 5 * ((k / 5 + j) % 20) AS slot FROM generate_series(0, $4::int - 1) AS j) AS d,
            LATERAL (SELECT ((d.n + d.n / 100) % 100)::int AS m) AS fate`,
      [events, spanDays, SEEDED_TYPES, deliveriesPerEvent],
    );
    // Attempt i of a delivery: its id is the delivery's ULID with i in place of a padding zero,
    // so it is unique and valid; only the last attempt has the delivery's outcome.
    await db.query(
      `INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at, duration_ms, response_code, response_body)
       SELECT 'att_' || substr(d.id, 5, 10) || '00000' || i || substr(d.id, 21, 10), d.id, i, d.url,
              d.created_at + (i - 1) * interval '5 seconds', 20 + (i * 7) % 50,
              CASE WHEN i = d.attempts THEN d.response_code ELSE 500 END,
              CASE WHEN i = d.attempts AND d.status = 'delivered' THEN 'ok' ELSE 'upstream error' END
       FROM deliveries AS d, generate_series(1, d.attempts) AS i`,
    );
  });
  const { rows } = await db.query<{
    deliveries: number;
    attempts: number;
    events: number;
    prunable: number;
    bytes: string;
  }>(
    // The totals from the statistics VACUUM just wrote (exact after a VACUUM of an insert-only table).
    `SELECT (SELECT reltuples::int FROM pg_class WHERE relname = 'deliveries') AS deliveries,
            (SELECT reltuples::int FROM pg_class WHERE relname = 'delivery_attempts') AS attempts,
            (SELECT reltuples::int FROM pg_class WHERE relname = 'events') AS events,
            (SELECT count(*)::int FROM deliveries WHERE next_attempt_at IS NULL AND created_at < now() - $1::int * interval '1 day') AS prunable,
            pg_total_relation_size('deliveries') + pg_total_relation_size('delivery_attempts') + pg_total_relation_size('events') AS bytes`,
    [retentionDays],
  );
  const row = rows[0]!;
  return { ...row, bytes: Number(row.bytes), seconds: (performance.now() - started) / 1000, steps };
}
