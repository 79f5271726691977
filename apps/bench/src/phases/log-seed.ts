import type pg from "pg";
import { createUlidFunction, loadWithoutIndexes } from "../harness/seed-sql.ts";

/** The seeded events' types (none of them a type the phases publish): event k has type k % 5, as have the subscriptions it goes to. */
export const LOG_TYPES = ["order.created", "order.paid", "customer.updated", "charge.refunded", "payout.failed"];

/**
 * A long-lived delivery log, written with set-based SQL alone:
 * - 100 subscriptions at a closed port, s to type s % 5, every even one in one of 5 tenants (10% of
 *   the rows each); with `busy`, a 101st gets the first delivery of every event (10% of the rows);
 * - events over the last 30 days, 10 deliveries each (sharing its created_at) to its type's;
 * - delivery n's fate by m = (n + n / 100) % 100: `queued`% queued, 10% failed for good after 3
 *   attempts (500 or 503), `retrying`% failed with a retry a day or more ahead (a pruner keeps
 *   them), 4% delivered at the second attempt, the rest at the first (5% 204, else 200).
 */
export async function seedLog(
  db: pg.Client,
  input: { deliveries: number; queued: number; retrying: number; busy?: boolean },
) {
  const started = performance.now();
  await createUlidFunction(db);
  await loadWithoutIndexes(db, ["subscriptions", "events", "deliveries", "delivery_attempts"], async () => {
    await db.query(
      `INSERT INTO signing_secrets (id, ciphertext)
       SELECT 'sec_' || pg_temp.ulid('2020-01-01', s), '\\x00'::bytea FROM generate_series(0, 100) AS s`,
    );
    await db.query(
      `INSERT INTO subscriptions (id, url, events, secret_id, tenant_id, created_at)
       SELECT 'sub_' || pg_temp.ulid('2020-01-01', s), 'http://127.0.0.1:9/s' || s, ARRAY[($1::text[])[s % 5 + 1]],
              'sec_' || pg_temp.ulid('2020-01-01', s), CASE WHEN s % 2 = 0 THEN 'tenant_' || (s / 2) % 5 END, now() - interval '31 days'
       FROM generate_series(0, 100) AS s`,
      [LOG_TYPES],
    );
    // Event k at 30 days ago + k steps. `start` is a value: each statement has its own now().
    const start = new Date(Date.now() - 30 * 86_400_000).toISOString();
    const at = `date_trunc('milliseconds', '${start}'::timestamptz + k * ((interval '30 days' - interval '1 hour') / $1::int))`;
    await db.query(
      `INSERT INTO events (id, type, data, created_at)
       SELECT 'evt_' || pg_temp.ulid(t.at, k), ($2::text[])[k % 5 + 1], jsonb_build_object('order_id', 'ord_' || k, 'amount', 4200), t.at
       FROM generate_series(0, $1::int - 1) AS k, LATERAL (SELECT ${at} AS at) AS t`,
      [input.deliveries / 10, LOG_TYPES],
    );
    // Delivery n = k * 10 + j goes to subscription (k % 5) + 5 * ((k / 5 + j) % 20), of the event's
    // type. The event's values are computed once (OFFSET 0 keeps the subquery from being folded).
    await db.query(
      `INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, tenant_id, status, attempts,
                               response_code, next_attempt_at, created_at, updated_at)
       SELECT 'dlv_' || t.time_part || '000000' || pg_temp.crockford10(d.n), subs.ids[d.slot + 1], t.event_id,
              ($2::text[])[k % 5 + 1], subs.urls[d.slot + 1], subs.secrets[d.slot + 1], subs.tenants[d.slot + 1],
              CASE WHEN m < $3 THEN 'queued' WHEN m < $3 + 10 + $4 THEN 'failed' ELSE 'delivered' END::delivery_status,
              CASE WHEN m < $3 THEN 0 WHEN m < $3 + 10 THEN 3 WHEN m < $3 + 14 + $4 THEN 2 ELSE 1 END,
              CASE WHEN m < $3 THEN NULL WHEN m < $3 + 10 + $4 THEN 500 + 3 * (m % 2) WHEN m >= 95 THEN 204 ELSE 200 END,
              CASE WHEN m < $3 THEN t.at WHEN m >= $3 + 10 AND m < $3 + 10 + $4 THEN now() + interval '1 day' + (d.n % 1440) * interval '1 minute' END,
              t.at, t.at + interval '5 seconds'
       FROM (SELECT array_agg(id ORDER BY id) AS ids, array_agg(url ORDER BY id) AS urls, array_agg(secret_id ORDER BY id) AS secrets,
                    array_agg(tenant_id ORDER BY id) AS tenants FROM subscriptions) AS subs,
            generate_series(0, $1::int - 1) AS k,
            LATERAL (SELECT a.at, p.time_part, 'evt_' || p.time_part || '000000' || pg_temp.crockford10(k) AS event_id
                     FROM (SELECT ${at} AS at) AS a,
                          LATERAL (SELECT pg_temp.crockford10((extract(epoch FROM a.at) * 1000)::bigint) AS time_part) AS p
                     OFFSET 0) AS t,
            LATERAL (SELECT k * 10::bigint + j AS n, CASE WHEN $5 AND j = 0 THEN 100 ELSE (k % 5) + 5 * ((k / 5 + j) % 20) END AS slot
                     FROM generate_series(0, 9) AS j) AS d,
            LATERAL (SELECT ((d.n + d.n / 100) % 100)::int AS m) AS fate`,
      [input.deliveries / 10, LOG_TYPES, input.queued, input.retrying, input.busy ?? false],
    );
    // Attempt i's id is the delivery's ULID with i for a padding zero; only the last has the outcome.
    await db.query(
      `INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code, response_body)
       SELECT 'att_' || substr(d.id, 5, 10) || '00000' || i || substr(d.id, 21, 10), d.id, d.subscription_id, i, d.url,
              d.created_at + (i - 1) * interval '5 seconds', 20 + (hashtext(d.id) & 255) + i * 7, CASE WHEN i = d.attempts THEN d.response_code ELSE 500 END,
              CASE WHEN i = d.attempts AND d.status = 'delivered' THEN 'ok' ELSE 'upstream error' END
       FROM deliveries AS d, generate_series(1, d.attempts) AS i`,
    );
  });
  // The totals from the statistics VACUUM just wrote (exact after a VACUUM of an insert-only table).
  const { rows } = await db.query<{ deliveries: number; attempts: number; events: number; bytes: string }>(
    `SELECT (SELECT reltuples::int FROM pg_class WHERE relname = 'deliveries') AS deliveries,
            (SELECT reltuples::int FROM pg_class WHERE relname = 'delivery_attempts') AS attempts,
            (SELECT reltuples::int FROM pg_class WHERE relname = 'events') AS events,
            pg_total_relation_size('deliveries') + pg_total_relation_size('delivery_attempts') + pg_total_relation_size('events') AS bytes`,
  );
  return { ...rows[0]!, gigabytes: Number(rows[0]!.bytes) / 1024 ** 3, seconds: (performance.now() - started) / 1000 };
}
