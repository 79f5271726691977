import type pg from "pg";
import { createUlidFunction } from "../seed-sql.ts";
import { settings } from "../settings.ts";

export const EVENT_TYPES = [
  "invoice.paid",
  "invoice.created",
  "customer.updated",
  "charge.refunded",
  "payout.failed",
] as const;

/**
 * Seeds the delivery log with SQL alone (generate_series), in well under a minute:
 * - 100 subscriptions (each with a signing secret row; the ciphertext is a dummy, since no worker
 *   runs on this database), 100,000 events over the last 30 days, 10 deliveries per event;
 * - every 4 consecutive events share one millisecond, and an event's deliveries share its
 *   created_at (as publishEvent writes them in one statement), so 40 rows share each timestamp
 *   and the (created_at, id) tie-break is exercised;
 * - statuses: 80% delivered, 15% failed, 5% queued, spread evenly over time;
 * - response codes: queued ones have none; failed ones 500, 503 or 404 (5% each, so 5xx is 10%
 *   of rows and an exact 500 is 5%); delivered ones 200, or 204 for 5% of rows;
 * - 5 event types, evenly mixed, so `event=` matches 20% of rows (and every subscription gets
 *   every type and every status);
 * - tenants (contract §13): every even-numbered subscription belongs to one of 5 tenants
 *   (tenant_0 .. tenant_4, 10 subscriptions each), and its deliveries carry its tenant, so each
 *   tenant has 10% of the rows and half the table has no tenant;
 * - ids are prefix + a valid ULID (10 chars of the creation millisecond, then 16 chars whose last
 *   10 encode the row number), so they are unique and sort like the product's.
 * The indexes are dropped during the load and rebuilt from their own definitions afterwards
 * (much faster than maintaining them row by row), and foreign keys are not checked during the
 * load (session_replication_role), since the rows are consistent by construction.
 */
export async function seedDeliveryLog(db: pg.Client): Promise<{ deliveries: number; seconds: number }> {
  const started = performance.now();
  const { subscriptions, events, deliveriesPerEvent } = settings.list;
  await db.query("SET maintenance_work_mem = '256MB'");
  await db.query("SET session_replication_role = replica");
  await createUlidFunction(db);

  const indexes = await db.query<{ indexname: string; indexdef: string }>(
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('deliveries', 'events') AND indexname NOT LIKE '%_pkey'",
  );
  for (const index of indexes.rows) await db.query(`DROP INDEX "${index.indexname}"`);

  await db.query(
    `INSERT INTO signing_secrets (id, ciphertext)
     SELECT 'sec_' || pg_temp.ulid(now(), s), '\\x00'::bytea FROM generate_series(1, $1::int) AS s`,
    [subscriptions],
  );
  await db.query(
    `INSERT INTO subscriptions (id, url, events, secret_id, tenant_id, created_at)
     SELECT 'sub_' || pg_temp.ulid(now() - interval '31 days', s), 'http://127.0.0.1:9/s' || s, ARRAY['*'],
            'sec_' || pg_temp.ulid(now(), s), CASE WHEN s % 2 = 0 THEN 'tenant_' || (s / 2) % 5 END, now() - interval '31 days'
     FROM generate_series(1, $1::int) AS s`,
    [subscriptions],
  );
  // Event k (0-based) is created at now - 30 days + floor(k / 4) steps; a step spreads the events
  // evenly over 30 days. Its type is chosen by (k + k / 10) % 5, for the reason given below.
  await db.query(
    `INSERT INTO events (id, type, data, created_at)
     SELECT 'evt_' || pg_temp.ulid(at, k), ($2::text[])[(k + k / 10) % 5 + 1], jsonb_build_object('seq', k), at
     FROM generate_series(0, $1::int - 1) AS k,
          LATERAL (SELECT date_trunc('milliseconds', now() - interval '30 days' + (k / 4) * (interval '30 days' / ($1::int / 4))) AS at) AS t`,
    [events, EVENT_TYPES],
  );
  // Row n (0-based, oldest first) goes to subscription n % 100, and its status is chosen by
  // (n / 100 + n) % 20, so that every subscription has every status (n % 20 alone would give
  // each subscription a single one).
  await db.query(
    `WITH subs AS (SELECT row_number() OVER (ORDER BY id) - 1 AS slot, id, url, secret_id, tenant_id FROM subscriptions),
          numbered AS (SELECT id, type, created_at, row_number() OVER (ORDER BY created_at, id) - 1 AS k FROM events),
          rows AS (SELECT e.*, e.k * $1::int + j AS n, (e.k * $1::int + j + (e.k * $1::int + j) / $2::int) % 20 AS m
                   FROM numbered AS e, generate_series(0, $1::int - 1) AS j)
     INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, tenant_id, status, attempts, response_code,
                             next_attempt_at, created_at, updated_at)
     SELECT 'dlv_' || pg_temp.ulid(r.created_at, r.n), s.id, r.id, r.type, s.url, s.secret_id, s.tenant_id,
            CASE WHEN r.m = 0 THEN 'queued' WHEN r.m <= 3 THEN 'failed' ELSE 'delivered' END::delivery_status,
            CASE WHEN r.m = 0 THEN 0 WHEN r.m <= 3 THEN r.m ELSE 1 END,
            CASE r.m WHEN 0 THEN NULL WHEN 1 THEN 500 WHEN 2 THEN 503 WHEN 3 THEN 404 WHEN 4 THEN 204 ELSE 200 END,
            CASE WHEN r.m = 0 THEN r.created_at WHEN r.m <= 3 THEN r.created_at + interval '5 minutes' END,
            r.created_at, r.created_at
     FROM rows AS r JOIN subs AS s ON s.slot = r.n % $2::int`,
    [deliveriesPerEvent, subscriptions],
  );
  await db.query("SET session_replication_role = origin");
  for (const index of indexes.rows) await db.query(index.indexdef);
  // What autovacuum would have done to an old table: statistics, and a visibility map so that
  // index-only scans are possible.
  await db.query("VACUUM ANALYZE");
  const { rows } = await db.query<{ count: number }>("SELECT count(*)::int AS count FROM deliveries");
  return { deliveries: rows[0]?.count ?? 0, seconds: (performance.now() - started) / 1000 };
}
