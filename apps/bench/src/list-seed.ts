import type pg from "pg";
import { settings } from "./settings.ts";

const CROCKFORD = "'0123456789ABCDEFGHJKMNPQRSTVWXYZ'";
const CROCKFORD_TERMS = Array.from({ length: 10 }, (_, i) => `substr(${CROCKFORD}, ((value >> ${5 * (9 - i)}) & 31)::int + 1, 1)`).join(" || ");

export const EVENT_TYPES = ["invoice.paid", "invoice.created", "customer.updated", "charge.refunded", "payout.failed"] as const;

/**
 * Seeds the delivery log with SQL alone (generate_series), in well under a minute:
 * - 100 subscriptions (each with a signing secret row; the ciphertext is a dummy, since no worker
 *   runs on this database), 100,000 events over the last 30 days, 10 deliveries per event;
 * - every 4 consecutive events share one millisecond, and an event's deliveries share its
 *   created_at (as publishEvent writes them in one statement), so 40 rows share each timestamp
 *   and the (created_at, id) tie-break is exercised;
 * - statuses: 80% delivered, 15% failed, 5% queued, spread evenly over time;
 * - event types cycle through 5 names, so `event=` matches 20% of rows;
 * - ids are prefix + a valid ULID (10 chars of the creation millisecond, then 16 chars whose last
 *   10 encode the row number), so they are unique and sort like the product's.
 * The indexes are dropped during the load and rebuilt from their own definitions afterwards
 * (much faster than maintaining them row by row), and foreign keys are not checked during the
 * load (session_replication_role), since the rows are consistent by construction.
 */
export async function seedDeliveryLog(db: pg.Client): Promise<{ deliveries: number; seconds: number }> {
  const started = performance.now();
  const { subscriptions, events, deliveriesPerEvent } = settings.list;
  await timed(db,"SET maintenance_work_mem = '256MB'");
  await timed(db,"SET session_replication_role = replica");
  // Crockford base32 of the low 50 bits of a bigint, 10 characters. A single expression, with no
  // FROM and no loop, so that PostgreSQL inlines it: a function it has to call costs ~100 us a row.
  await timed(db,`CREATE FUNCTION pg_temp.crockford10(value bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT ${CROCKFORD_TERMS} $$`);
  await timed(db,`
    CREATE FUNCTION pg_temp.ulid(at timestamptz, n bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
      SELECT pg_temp.crockford10((extract(epoch FROM at) * 1000)::bigint) || '000000' || pg_temp.crockford10(n) $$`);

  const indexes = await db.query<{ indexname: string; indexdef: string }>(
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('deliveries', 'events') AND indexname NOT LIKE '%_pkey'",
  );
  for (const index of indexes.rows) await timed(db,`DROP INDEX "${index.indexname}"`);

  await timed(db,
    `INSERT INTO signing_secrets (id, ciphertext)
     SELECT 'sec_' || pg_temp.ulid(now(), s), '\\x00'::bytea FROM generate_series(1, $1::int) AS s`,
    [subscriptions],
  );
  await timed(db,
    `INSERT INTO subscriptions (id, url, events, secret_id, created_at)
     SELECT 'sub_' || pg_temp.ulid(now() - interval '31 days', s), 'http://127.0.0.1:9/s' || s, ARRAY['*'],
            'sec_' || pg_temp.ulid(now(), s), now() - interval '31 days'
     FROM generate_series(1, $1::int) AS s`,
    [subscriptions],
  );
  // Event k (0-based) is created at now - 30 days + floor(k / 4) steps; a step spreads the events
  // evenly over 30 days.
  await timed(db,
    `INSERT INTO events (id, type, data, created_at)
     SELECT 'evt_' || pg_temp.ulid(at, k), ($2::text[])[k % 5 + 1], jsonb_build_object('seq', k), at
     FROM generate_series(0, $1::int - 1) AS k,
          LATERAL (SELECT date_trunc('milliseconds', now() - interval '30 days' + (k / 4) * (interval '30 days' / ($1::int / 4))) AS at) AS t`,
    [events, EVENT_TYPES],
  );
  await timed(db,
    `WITH subs AS (SELECT array_agg(id ORDER BY id) AS ids, array_agg(url ORDER BY id) AS urls, array_agg(secret_id ORDER BY id) AS secrets
                   FROM subscriptions),
          numbered AS (SELECT id, type, created_at, row_number() OVER (ORDER BY created_at, id) - 1 AS k FROM events)
     INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, attempts, response_code,
                             next_attempt_at, created_at, updated_at)
     SELECT 'dlv_' || pg_temp.ulid(e.created_at, n), subs.ids[slot], e.id, e.type, subs.urls[slot], subs.secrets[slot],
            CASE WHEN n % 20 = 0 THEN 'queued' WHEN n % 20 <= 3 THEN 'failed' ELSE 'delivered' END::delivery_status,
            CASE WHEN n % 20 = 0 THEN 0 WHEN n % 20 <= 3 THEN n % 20 ELSE 1 END,
            CASE WHEN n % 20 = 0 THEN NULL WHEN n % 20 <= 3 THEN 500 ELSE 200 END,
            CASE WHEN n % 20 = 0 THEN e.created_at WHEN n % 20 <= 3 THEN e.created_at + interval '5 minutes' END,
            e.created_at, e.created_at
     FROM subs, numbered AS e, generate_series(0, $1::int - 1) AS j,
          LATERAL (SELECT e.k * $1::int + j AS n) AS nn,
          LATERAL (SELECT ((e.k * $1::int + j) % $2::int + 1)::int AS slot) AS sl`,
    [deliveriesPerEvent, subscriptions],
  );
  await timed(db,"SET session_replication_role = origin");
  for (const index of indexes.rows) await timed(db,index.indexdef);
  // What autovacuum would have done to an old table: statistics, and a visibility map so that
  // index-only scans are possible.
  await timed(db,"VACUUM ANALYZE");
  const { rows } = await db.query<{ count: number }>("SELECT count(*)::int AS count FROM deliveries");
  return { deliveries: rows[0]?.count ?? 0, seconds: (performance.now() - started) / 1000 };
}

async function timed(db: pg.Client, ...args: Parameters<pg.Client["query"]>) {
  const t = performance.now();
  // @ts-ignore
  const r = await db.query(...args);
  console.log(((performance.now() - t) / 1000).toFixed(2), String(args[0]).slice(0, 80).replace(/\s+/g, " "));
  return r;
}
